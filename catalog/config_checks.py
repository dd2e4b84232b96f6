"""What the config's Structs cannot say themselves: the rules :func:`catalog.config.decode_config`
checks after decoding, each refusal naming the file and the key (``docs/config.md``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import msgspec

from catalog.config_curation import CurationConfig
from catalog.config_root import Config
from catalog.config_sections import PublishConfig, ServerConfig, SynonymsConfig
from catalog.config_specs import SpecConfig
from catalog.errors import ConfigError
from catalog.model import header_name_problem
from catalog.published import parse_store_url

__all__ = ["check", "check_shape", "locate"]


def check(config: Config, file: str) -> None:
    """Every rule of ``config`` that spans keys, or that a type cannot state.

    Raises:
        ConfigError: naming ``file`` and the key.
    """
    _check_specs(config, file)
    _check_synonyms(config.search.synonyms, file)
    _check_curation(config.curation, file)
    _check_server(config.server, file)
    _check_auth(config, file)
    _check_publish(config.publish, file)
    if config.console.enabled and config.server.ops_token_env is None:
        raise ConfigError(
            file, "console.enabled: set server.ops_token_env (the console's only way in)"
        )


def _check_specs(config: Config, file: str) -> None:
    """Each document's settings: one JWT key source, a key with its certificate, header
    names that are tokens, and base and proxy URLs of the right shape.
    """
    for source, spec in config.specs.items():
        if spec.jwt and spec.jwt.hs256_secret_env and spec.jwt.jwks_file:
            raise ConfigError(
                file, f"specs.{source!r}.jwt: set hs256_secret_env or jwks_file, not both"
            )
        if spec.client_key and not spec.client_cert:
            raise ConfigError(file, f"specs.{source!r}.client_key: set client_cert too")
        _check_header_names(spec, f"specs.{source!r}", file)
        if spec.base_url is not None and not _is_base_url(spec.base_url):
            raise ConfigError(
                file,
                f"specs.{source!r}.base_url: not an absolute http(s) URL without query, "
                "fragment or backslash",
            )
        if spec.proxy is not None and not _is_http_proxy(spec.proxy):
            # Not the value itself in the message: it may hold the proxy's password.
            raise ConfigError(
                file, f"specs.{source!r}.proxy: not an http://[user:password@]host[:port] URL"
            )


def _check_publish(publish: PublishConfig, file: str) -> None:
    """The store URL parses (``catalog.published.parse_store_url``)."""
    if publish.url is not None:
        try:
            parse_store_url(publish.url)
        except ValueError as exc:
            raise ConfigError(file, f"publish.url: {exc}") from exc
    if publish.endpoint_url is not None and not _is_base_url(publish.endpoint_url):
        raise ConfigError(file, "publish.endpoint_url: not an absolute http(s) URL")


def _check_server(server: ServerConfig, file: str) -> None:
    """The connection limits fit together (docs/connections.md)."""
    # Each key's own range is declared on its field (msgspec.Meta).
    if server.max_connections < 2 * server.max_listen_streams:
        raise ConfigError(
            file,
            "server.max_connections: must be at least twice server.max_listen_streams "
            "(listen streams are refused before the connections run out)",
        )


def check_shape(raw: object, file: str) -> None:
    """A word written as a key of ``[search.synonyms]`` (``ticket = ["issue"]``), the
    likeliest mistake there, is refused saying which of the two shapes to write.
    """
    search = raw.get("search") if isinstance(raw, dict) else None
    synonyms = search.get("synonyms") if isinstance(search, dict) else None
    if not isinstance(synonyms, dict):
        return  # absent, or the wrong type: msgspec says so
    for key, value in synonyms.items():
        if key in ("equivalent", "one_way"):
            continue
        given = [value] if isinstance(value, str) else value
        words = ", ".join(f'"{w}"' for w in given) if isinstance(given, list) else "..."
        raise ConfigError(
            file,
            f"search.synonyms.{key}: not a key of [search.synonyms]; words that mean the "
            f'same are a group, equivalent = [["{key}", {words}]], and a word that also '
            f"searches others without the reverse is a rule, one_way = {{ {key} = [{words}] }}",
        )


def _check_synonyms(synonyms: SynonymsConfig, file: str) -> None:
    """Each synonym is one word of letters or digits, as search folds it; a group holds
    two different words at least, a rule one word at least.
    """
    for i, group in enumerate(synonyms.equivalent):
        if len({w.casefold() for w in group}) < 2:
            raise ConfigError(
                file, f"search.synonyms.equivalent[{i}]: a group needs two different words"
            )
    for key, words in synonyms.one_way.items():
        if not words:
            raise ConfigError(file, f"search.synonyms.one_way.{key}: name a word it searches")
    named = [
        *(
            (f"search.synonyms.equivalent[{i}]", w)
            for i, g in enumerate(synonyms.equivalent)
            for w in g
        ),
        *(
            (f"search.synonyms.one_way.{k}", w)
            for k, ws in synonyms.one_way.items()
            for w in (k, *ws)
        ),
    ]
    for key, word in named:
        if not re.fullmatch(r"[^\W_]+", word):
            raise ConfigError(file, f"{key}: {word!r} is not one word of letters or digits")


def _check_auth(config: Config, file: str) -> None:
    """``[auth]`` and the specs' ``identity`` fit together (docs/authorization.md)."""
    auth = config.auth
    if auth.resource is not None and not _is_base_url(auth.resource):
        raise ConfigError(file, "auth.resource: not an absolute http(s) URL without query")
    if auth.resource is None and (auth.authorization_servers or auth.require_auth):
        raise ConfigError(file, "auth.resource: set it (the audience tokens must carry)")
    if auth.resource is not None and not auth.authorization_servers:
        raise ConfigError(file, "auth.authorization_servers: name at least one")
    for i, server in enumerate(auth.authorization_servers):
        where = f"auth.authorization_servers[{i}]"
        if (server.jwks_file is None) == (server.jwks_url is None):
            raise ConfigError(file, f"{where}: set jwks_file or jwks_url (one of them)")
        for key in ("jwks_url", "token_endpoint"):
            url = getattr(server, key)
            if url is not None and not _is_base_url(url):
                raise ConfigError(file, f"{where}.{key}: not an absolute http(s) URL")
    exchanging = any(server.token_endpoint for server in auth.authorization_servers)
    for source, spec in config.specs.items():
        where = f"specs.{source!r}"
        if spec.identity is not None and auth.resource is None:
            raise ConfigError(file, f"{where}.identity: needs an [auth] resource server")
        if spec.identity == "token_exchange":
            if spec.exchange is None:
                raise ConfigError(file, f"{where}.exchange: set audience for token_exchange")
            if not exchanging:
                raise ConfigError(
                    file,
                    f"{where}.identity: token_exchange needs a token_endpoint in "
                    "auth.authorization_servers",
                )
        elif spec.exchange is not None:
            raise ConfigError(file, f'{where}.exchange: only with identity = "token_exchange"')


def _check_header_names(spec: SpecConfig, where: str, file: str) -> None:
    """Every header name a spec's settings send or read passes
    :func:`catalog.model.header_name_problem`: a token (one with a space or a separator
    would make every request malformed), and no framing or hop-by-hop header (a caller's
    ``Transfer-Encoding`` smuggled a second request to the backend).
    """
    forwarded = () if spec.forward_headers is msgspec.UNSET else spec.forward_headers
    named = [
        *((f"{where}.forward_headers", name) for name in forwarded),
        *((f"{where}.static_headers", name) for name in spec.static_headers),
        *((f"{where}.credentials.{scheme}", name) for scheme, name in spec.credentials.items()),
    ]
    for key, name in named:
        problem = header_name_problem(name)
        if problem:
            raise ConfigError(file, f"{key}: {problem}")


def _is_base_url(url: str) -> bool:
    r"""An absolute http(s) URL with a host, no query or fragment, and no backslash: WHATWG
    parsers read ``http://h:1\@h2:2/`` as host ``h``, ``urlsplit`` as ``h2``.
    """
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and port_ok
        and "\\" not in url
        and not (parts.query or parts.fragment)
    )


def _is_http_proxy(url: str) -> bool:
    """``http://[user:password@]host[:port][/]``: what ``server.outbound.http_client`` speaks to."""
    if "\\" in url:  # read differently by different URL parsers (see _is_base_url)
        return False
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # a port that is no number, or out of range
        return False
    return (
        parts.scheme == "http"
        and bool(parts.hostname)
        and port_ok
        and parts.path in ("", "/")
        and not (parts.query or parts.fragment)
    )


def _check_curation(curation: CurationConfig, file: str) -> None:
    # An empty match would silently apply a rule to the whole catalog: refuse it.
    for kind, rules in (("include", curation.include), ("exclude", curation.exclude)):
        for i, match in enumerate(rules):
            if match.is_empty():
                raise ConfigError(file, f"curation.{kind}[{i}]: the rule has no condition")
    for i, override in enumerate(curation.override):
        if override.match.is_empty():
            raise ConfigError(file, f"curation.override[{i}]: match has no condition")
    for i, rule in enumerate(curation.variants):
        if rule.match.is_empty():
            raise ConfigError(file, f"curation.variants[{i}]: match has no condition")
        if not rule.tools:
            raise ConfigError(file, f"curation.variants[{i}]: tools lists no variant")
        names = [variant.name for variant in rule.tools]
        if len(set(names)) != len(names):
            raise ConfigError(file, f"curation.variants[{i}]: variant names repeat")


def locate(raw: object, exc: msgspec.ValidationError) -> str:
    """What a refused conversion of ``raw`` says, naming the key as the TOML file has it."""
    # msgspec hides dict keys ("- at `$.specs[...]`"), so find the failing spec section
    # by converting each on its own and name it as the TOML key a user would look for.
    specs = raw.get("specs") if isinstance(raw, dict) else None
    if isinstance(specs, dict):
        for source, section in specs.items():
            try:
                msgspec.convert(section, type=SpecConfig)
            except msgspec.ValidationError as inner:
                return _describe(inner, prefix=f'specs."{source}"')
    return _describe(exc, prefix="")


def _describe(exc: msgspec.ValidationError, *, prefix: str) -> str:
    # "Object contains unknown field `nmespace` - at `$.jwt`" → "<prefix>.jwt: Object ..."
    text, _, where = str(exc).partition(" - at `")
    where = where.rstrip("`").removeprefix("$").lstrip(".")
    key = ".".join(part for part in (prefix, where) if part)
    return f"{key}: {text}" if key else text
