from __future__ import annotations

import msgspec
import pytest

from catalog.config import (
    DEFAULT_ALLOWED_HOSTS,
    Config,
    SpecConfig,
    decode_config,
    default_namespace,
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


def test_unknown_key_names_it() -> None:
    with pytest.raises(ConfigError, match="nmespace"):
        decode_config(b'[specs."a.json"]\nnmespace = "x"\n', file="f.toml")


def test_jwt_secret_and_jwks_are_exclusive() -> None:
    text = b'[specs."a.json".jwt]\nhs256_secret_env = "S"\njwks_file = "k.json"\n'
    with pytest.raises(ConfigError, match="not both"):
        decode_config(text, file="f.toml")


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
