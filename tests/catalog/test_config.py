from __future__ import annotations

import re

import msgspec
import pytest

from catalog.config import (
    DEFAULT_ALLOWED_HOSTS,
    Config,
    SpecConfig,
    decode_config,
    default_namespace,
    missing_files,
    with_files_from,
)
from catalog.errors import ConfigError


def test_empty_file_gives_defaults_that_work_for_a_bare_directory() -> None:
    config = decode_config(b"", file="sezzlee.toml")
    assert config == Config()
    assert config.server.allowed_hosts == DEFAULT_ALLOWED_HOSTS
    spec = config.spec("anything.yaml")
    assert spec.namespace is msgspec.UNSET
    assert spec.forward_headers is msgspec.UNSET


def test_empty_namespace_is_distinct_from_absent() -> None:
    config = decode_config(b'[specs."orders.yaml"]\nnamespace = ""\n', file="c.toml")
    assert config.spec("orders.yaml").namespace == ""
    assert config.spec("other.yaml").namespace is msgspec.UNSET


def test_full_spec_section_round_trips() -> None:
    text = b"""
[server]
allowed_hosts = ["gateway.internal"]
response_budget_bytes = 1000

[visibility]
missing_credentials = "uncertain"

[specs."github.json"]
namespace = "gh"
base_url = "https://api.github.com"
forward_headers = ["Authorization", "X-Trace"]
static_headers = { "X-Team" = "TEAM_ENV" }
timeout_seconds = 5
credentials = { api_key = "X-Api-Key" }

[specs."github.json".jwt]
issuer = "https://issuer.example"
audience = "sezzlee"
hs256_secret_env = "JWT_SECRET"
"""
    config = decode_config(text, file="c.toml")
    spec = config.spec("github.json")
    assert spec == SpecConfig(
        namespace="gh",
        base_url="https://api.github.com",
        forward_headers=("Authorization", "X-Trace"),
        static_headers={"X-Team": "TEAM_ENV"},
        timeout_seconds=5,
        credentials={"api_key": "X-Api-Key"},
        jwt=spec.jwt,
    )
    assert spec.jwt is not None
    assert spec.jwt.hs256_secret_env == "JWT_SECRET"
    assert config.visibility.missing_credentials == "uncertain"
    assert config.server.allowed_hosts == ("gateway.internal",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b'[specs."a.json"]\nnmespace = "x"\n', 'sezzlee.toml: specs."a.json": '),
        (b'[specs."a.json".jwt]\nissuer = 3\n', 'specs."a.json".jwt.issuer'),
        (b"[server]\nallowed_hosts = 3\n", "server.allowed_hosts"),
        (b"[sever]\n", "unknown field `sever`"),
        (b'[visibility]\nmissing_credentials = "show"\n', "visibility.missing_credentials"),
        (b"[[[", "not valid TOML"),
    ],
)
def test_bad_files_name_the_file_and_key(text: bytes, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        decode_config(text, file="sezzlee.toml")
    message = str(info.value)
    assert message.startswith("sezzlee.toml: ")
    assert expected in message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (b'[specs."a.json"]\nstatic_headers = { "X Team" = "TEAM" }\n', "static_headers"),
        (b'[specs."a.json"]\nforward_headers = ["Authorization", "X-Trace "]\n', "forward_headers"),
        (b'[specs."a.json"]\ncredentials = { key = "X(Key)" }\n', "credentials.key"),
        (b'[specs."a.json"]\nforward_headers = [""]\n', "forward_headers"),
    ],
)
def test_a_header_name_must_be_a_token(text: bytes, key: str) -> None:
    # A name with a space or a separator (RFC 9110 §5.1, §5.6.2) makes a malformed request.
    with pytest.raises(ConfigError, match="not a valid header name") as info:
        decode_config(text, file="sezzlee.toml")
    assert f"specs.'a.json'.{key}" in str(info.value)


@pytest.mark.parametrize(
    "name",
    [
        *("Transfer-Encoding", "Content-Length", "Host", "Connection", "TE", "Upgrade"),
        *("Trailer", "Keep-Alive", "Proxy-Authorization", "proxy-connection", "Proxy-X"),
    ],
)
@pytest.mark.parametrize("key", ["forward_headers", "static_headers", "credentials"])
def test_framing_and_hop_by_hop_headers_are_refused_by_name(name: str, key: str) -> None:
    # Issue 21, finding 6: "Transfer-Encoding: chunked" from a caller smuggled a request.
    value = {
        "forward_headers": f'["{name}"]',
        "static_headers": f'{{ "{name}" = "ENV" }}',
        "credentials": f'{{ key = "{name}" }}',
    }[key]
    text = f'[specs."a.json"]\n{key} = {value}\n'.encode()
    with pytest.raises(ConfigError, match="framing or hop-by-hop") as info:
        decode_config(text, file="sezzlee.toml")
    assert name in str(info.value)
    assert f"specs.'a.json'.{key}" in str(info.value)


@pytest.mark.parametrize(
    "url", ["http://h:1\\\\@h2:2/", "https://api.example\\\\.evil.example", "/relative", "ftp://h/"]
)
def test_a_base_url_parsers_would_disagree_on_is_refused(url: str) -> None:
    # WHATWG reads http://h:1\@h2:2/ as host h, urllib as userinfo then host h2.
    text = f'[specs."a.json"]\nbase_url = "{url}"\n'.encode()
    with pytest.raises(ConfigError, match=r"specs\.'a\.json'\.base_url"):
        decode_config(text, file="f.toml")


def test_a_proxy_with_a_backslash_is_refused() -> None:
    text = b'[specs."a.json"]\nproxy = "http://p:1\\\\@q:3128"\n'
    with pytest.raises(ConfigError, match=r"specs\.'a\.json'\.proxy"):
        decode_config(text, file="f.toml")


def test_unknown_key_names_it() -> None:
    with pytest.raises(ConfigError, match="nmespace"):
        decode_config(b'[specs."a.json"]\nnmespace = "x"\n', file="f.toml")


def test_jwt_secret_and_jwks_are_exclusive() -> None:
    text = b'[specs."a.json".jwt]\nhs256_secret_env = "S"\njwks_file = "k.json"\n'
    with pytest.raises(ConfigError, match="not both"):
        decode_config(text, file="f.toml")


@pytest.mark.parametrize(
    "proxy",
    ["socks5://u:secret@p:1080", "https://p:3128", "http://p:3128/path", "http:///x", "http://p:x"],
)
def test_a_proxy_must_be_an_http_url_and_its_value_is_not_repeated(proxy: str) -> None:
    text = f'[specs."a.json"]\nproxy = "{proxy}"\n'.encode()
    with pytest.raises(ConfigError, match=r"specs\.'a\.json'\.proxy") as caught:
        decode_config(text, file="f.toml")
    assert proxy not in str(caught.value)  # it may carry the proxy's password


@pytest.mark.parametrize(
    "proxy", ["http://p:3128", "http://u:p%40ss@p.example:8080/", "http://[::1]:3128"]
)
def test_http_proxies_are_accepted(proxy: str) -> None:
    text = f'[specs."a.json"]\nproxy = "{proxy}"\n'.encode()
    assert decode_config(text, file="f.toml").spec("a.json").proxy == proxy


def test_a_client_key_needs_its_certificate() -> None:
    with pytest.raises(ConfigError, match="set client_cert too"):
        decode_config(b'[specs."a.json"]\nclient_key = "k.pem"\n', file="f.toml")


def test_files_a_spec_names_are_taken_from_the_config_files_directory() -> None:
    text = (
        b'[specs."a.json"]\nca_bundle = "certs/ca.pem"\nclient_cert = "/etc/c.pem"\n'
        b'[specs."a.json".jwt]\njwks_file = "keys.json"\n'
        b'[specs."b.json"]\nnamespace = "b"\n'
    )
    config = with_files_from(decode_config(text, file="f.toml"), "/srv/gateway")
    spec = config.spec("a.json")
    assert spec.ca_bundle == "/srv/gateway/certs/ca.pem"
    assert spec.client_cert == "/etc/c.pem"  # an absolute path stays as written
    assert spec.client_key is None
    assert spec.jwt is not None
    assert spec.jwt.jwks_file == "/srv/gateway/keys.json"
    assert config.spec("b.json").jwt is None


@pytest.mark.parametrize(
    ("source", "namespace"),
    [
        ("github.json", "github"),
        ("amazonaws.com/ec2.json", "amazonaws_com_ec2"),
        ("Orders API.YAML", "orders_api"),
        ("nested/dir/slack.yml", "nested_dir_slack"),
        ("a--b.json", "a_b"),
    ],
)
def test_default_namespace_is_the_path_slug(source: str, namespace: str) -> None:
    assert default_namespace(source) == namespace


def test_missing_files_names_each_file_a_spec_names_that_is_not_there() -> None:
    text = (
        b'[specs."a.json"]\nca_bundle = "ca.pem"\nclient_cert = "c.pem"\nclient_key = "k.pem"\n'
        b'[specs."a.json".jwt]\njwks_file = "keys.json"\n'
        b'[specs."b.json"]\nnamespace = "b"\n'
    )
    config = with_files_from(decode_config(text, file="f.toml"), "/srv")
    there = {"/srv/c.pem"}
    assert missing_files(config, exists=there.__contains__) == [
        "specs.'a.json'.ca_bundle: /srv/ca.pem: no such file",
        "specs.'a.json'.client_key: /srv/k.pem: no such file",
        "specs.'a.json'.jwt.jwks_file: /srv/keys.json: no such file",
    ]
    assert missing_files(config, exists=lambda path: True) == []


_AS = '[[auth.authorization_servers]]\nissuer = "https://as.test"\n'


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ("[auth]\nrequire_auth = true\n", "auth.resource"),
        ('[auth]\nresource = "https://gw.test/mcp"\n', "auth.authorization_servers"),
        ('[auth]\nresource = "gw.test"\n' + _AS + 'jwks_file = "k"\n', "auth.resource"),
        ('[auth]\nresource = "https://gw.test/mcp"\n' + _AS, "jwks_file or jwks_url"),
        (
            '[auth]\nresource = "https://gw.test/mcp"\n' + _AS + 'jwks_file = "k"\n'
            '[specs."a.json"]\nidentity = "token_exchange"\n'
            'exchange = { audience = "https://a.test" }\n',
            "token_endpoint",
        ),
        (
            '[auth]\nresource = "https://gw.test/mcp"\n' + _AS + 'jwks_file = "k"\n'
            'token_endpoint = "https://as.test/token"\n'
            '[specs."a.json"]\nidentity = "token_exchange"\n',
            "exchange",
        ),
        ('[specs."a.json"]\nidentity = "passthrough"\n', "needs an .auth. resource server"),
        ('[specs."a.json"]\nidentity = "forward"\n', "identity"),
    ],
)
def test_auth_settings_that_do_not_fit_are_refused(toml: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        decode_config(toml.encode(), file="sezzlee.toml")


def test_auth_files_are_taken_from_the_config_directory() -> None:
    toml = '[auth]\nresource = "https://gw.test/mcp"\n' + _AS + 'jwks_file = "keys.json"\n'
    config = with_files_from(decode_config(toml.encode(), file="c"), "/etc/sezzlee")
    assert config.auth.authorization_servers[0].jwks_file == "/etc/sezzlee/keys.json"
    assert missing_files(config, exists=lambda _: False) == [
        "auth.authorization_servers[0].jwks_file: /etc/sezzlee/keys.json: no such file"
    ]


def test_search_section_turns_the_semantic_side_on_by_default_and_off_by_key() -> None:
    assert decode_config(b"", file="c.toml").search.semantic is True
    assert decode_config(b"", file="c.toml").search.query_threads == 1
    off = decode_config(b"[search]\nsemantic = false\nquery_threads = 2\n", file="c.toml")
    assert (off.search.semantic, off.search.query_threads) == (False, 2)
    with pytest.raises(ConfigError, match=r"search.query_threads: Expected `int` >= 1"):
        decode_config(b"[search]\nquery_threads = 0\n", file="c.toml")
    with pytest.raises(ConfigError, match=r"c.toml.*semantc"):
        decode_config(b"[search]\nsemantc = false\n", file="c.toml")


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        (
            'ticket = ["issue"]',
            "search.synonyms.ticket: not a key of [search.synonyms]; words that mean the same "
            'are a group, equivalent = [["ticket", "issue"]], and a word that also searches '
            'others without the reverse is a rule, one_way = { ticket = ["issue"] }',
        ),
        ('equivalent = ["ticket", "issue"]', "search.synonyms.equivalent[0]: Expected `array`"),
        ('equivalent = [["ticket"]]', "search.synonyms.equivalent[0]: a group needs two"),
        ('equivalent = [["Ticket", "ticket"]]', "search.synonyms.equivalent[0]: a group needs"),
        ("one_way = { charge = [] }", "search.synonyms.one_way.charge: name a word it searches"),
        ('one_way = { charge = "pay" }', "search.synonyms.one_way[...]: Expected `array`"),
        (
            'equivalent = [["ticket", "pull request"]]',
            "search.synonyms.equivalent[0]: 'pull request' is not one word",
        ),
    ],
)
def test_synonyms_that_say_nothing_or_in_another_shape_are_refused_by_key(
    toml: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        decode_config(f"[search.synonyms]\n{toml}\n".encode(), file="t.toml")


def test_synonyms_read_as_groups_and_rules() -> None:
    toml = '[search.synonyms]\nequivalent = [["ticket", "issue"]]\none_way = { charge = ["pay"] }\n'
    synonyms = decode_config(toml.encode(), file="t.toml").search.synonyms
    assert synonyms.equivalent == (("ticket", "issue"),)
    assert synonyms.one_way == {"charge": ("pay",)}
