"""The configuration file: one TOML document, decoded into a frozen Struct tree.

Pure: the caller reads the file (``*/__main__.py``) and hands over its bytes; environment
variables are named here (``static_headers``, ``hs256_secret_env``) and resolved by the
server at start-up, never read later.

Every key has a default, so a bare spec directory works with no file at all. Unknown keys
are rejected with the file and the key named: a typo fails loudly instead of being
ignored.

This module is the one surface callers import: the sections are declared in
``config_sections.py`` (gateway-wide), ``config_specs.py`` (one document's) and
``config_curation.py``, tied together by ``config_root.py``'s :class:`Config`, and the
rules a type cannot state in ``config_checks.py``.

Example::

    [server]
    allowed_hosts = ["127.0.0.1", "localhost", "gateway.internal"]

    [search]
    semantic = true                        # false: keyword ranking only, no model loaded

    [specs."github.json"]
    namespace = "gh"                       # absent: the slug of the path; "": none
    base_url = "https://api.github.com"    # overrides the document's servers
    forward_headers = ["Authorization"]    # caller headers sent to this backend only
    static_headers = { "X-Team" = "GITHUB_TEAM_HEADER" }   # header = env var name

    [specs."github.json".jwt]
    issuer = "https://issuer.example"
    hs256_secret_env = "GITHUB_JWT_SECRET"

    [auth]                                 # an OAuth resource server (docs/authorization.md)
    resource = "https://gateway.example/mcp"
    require_auth = true

    [[auth.authorization_servers]]
    issuer = "https://login.example"
    jwks_url = "https://login.example/jwks"
    token_endpoint = "https://login.example/token"   # for token_exchange backends
    client_id = "sezzlee"
    client_secret_env = "SEZZLEE_CLIENT_SECRET"

    [specs."billing.json"]
    identity = "token_exchange"            # the backend gets a token for itself
    exchange = { audience = "https://billing.example" }
"""

from __future__ import annotations

import os.path
import re
from collections.abc import Callable
from typing import Final

import msgspec

from catalog.config_checks import check, check_shape, locate
from catalog.config_curation import (
    AnnotationsOverride,
    CurationConfig,
    Match,
    OperationCuration,
    Override,
    Variant,
    VariantRule,
)
from catalog.config_root import Config
from catalog.config_sections import (
    DEFAULT_ALLOWED_HOSTS,
    AuthConfig,
    AuthorizationServer,
    ConsoleConfig,
    InvokeConfig,
    PublishConfig,
    SearchConfig,
    ServerConfig,
    SynonymsConfig,
    VisibilityConfig,
)
from catalog.config_specs import ExchangeConfig, JwtConfig, SpecConfig
from catalog.errors import ConfigError

__all__ = [
    "DEFAULT_ALLOWED_HOSTS",
    "AnnotationsOverride",
    "AuthConfig",
    "AuthorizationServer",
    "Config",
    "ConsoleConfig",
    "CurationConfig",
    "ExchangeConfig",
    "InvokeConfig",
    "JwtConfig",
    "Match",
    "OperationCuration",
    "Override",
    "PublishConfig",
    "SearchConfig",
    "ServerConfig",
    "SpecConfig",
    "SynonymsConfig",
    "Variant",
    "VariantRule",
    "VisibilityConfig",
    "decode_config",
    "default_namespace",
    "missing_files",
    "with_files_from",
]


_SLUG: Final = re.compile(r"[^a-z0-9]+")
_EXTENSIONS: Final = (".json", ".yaml", ".yml")


def default_namespace(source: str) -> str:
    """The slug of a spec path without its extension: ``amazonaws.com/ec2.json`` →
    ``amazonaws_com_ec2``. File stems alone collide in real directories.
    """
    stem = source
    for ext in _EXTENSIONS:
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
            break
    return _SLUG.sub("_", stem.lower()).strip("_")


def decode_config(data: bytes, *, file: str) -> Config:
    """Decode TOML bytes into a :class:`Config`.

    Raises:
        ConfigError: naming ``file`` and the offending key (or the TOML syntax error).
    """
    try:
        raw = msgspec.toml.decode(data)
    except msgspec.DecodeError as exc:
        raise ConfigError(file, f"not valid TOML: {exc}") from exc
    check_shape(raw, file)
    try:
        config = msgspec.convert(raw, type=Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(file, locate(raw, exc)) from exc
    check(config, file)
    return config


def with_files_from(config: Config, directory: str) -> Config:
    """``config`` with every file a spec names (TLS files, ``jwt.jwks_file``) taken from
    ``directory`` when relative (the config file's directory: where its author wrote them
    from). Pure: paths only.
    """
    servers = tuple(
        msgspec.structs.replace(server, jwks_file=_from(directory, server.jwks_file))
        for server in config.auth.authorization_servers
    )
    auth = msgspec.structs.replace(config.auth, authorization_servers=servers)
    specs = {
        source: msgspec.structs.replace(
            spec,
            ca_bundle=_from(directory, spec.ca_bundle),
            client_cert=_from(directory, spec.client_cert),
            client_key=_from(directory, spec.client_key),
            jwt=_jwt_from(directory, spec.jwt),
        )
        for source, spec in config.specs.items()
    }
    return msgspec.structs.replace(config, specs=specs, auth=auth)


def missing_files(config: Config, *, exists: Callable[[str], bool]) -> list[str]:
    """Each file a spec names (TLS files, ``jwt.jwks_file``) that is not there, as
    ``specs.'x.json'.ca_bundle: PATH: no such file``; empty when all are.

    Pure: ``exists`` is the caller's test (``os.path.isfile``), and ``config`` is as
    :func:`with_files_from` left it. The server refuses to start over any of these, and
    ``python -m indexer --check`` reports them in the same words.
    """
    problems = []
    for source, spec in sorted(config.specs.items()):
        named = {
            "ca_bundle": spec.ca_bundle,
            "client_cert": spec.client_cert,
            "client_key": spec.client_key,
            "jwt.jwks_file": spec.jwt.jwks_file if spec.jwt else None,
        }
        problems += [
            f"specs.{source!r}.{key}: {path}: no such file"
            for key, path in named.items()
            if path is not None and not exists(path)
        ]
    for i, server in enumerate(config.auth.authorization_servers):
        if server.jwks_file is not None and not exists(server.jwks_file):
            problems.append(
                f"auth.authorization_servers[{i}].jwks_file: {server.jwks_file}: no such file"
            )
    return problems


def _jwt_from(directory: str, jwt: JwtConfig | None) -> JwtConfig | None:
    if jwt is None:
        return None
    return msgspec.structs.replace(jwt, jwks_file=_from(directory, jwt.jwks_file))


def _from(directory: str, path: str | None) -> str | None:
    return None if path is None else os.path.join(directory, path)  # an absolute path wins
