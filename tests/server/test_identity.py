"""server/identity/: credentials bound to a document's origins, JWT scopes, audiences."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import jwt
import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.backends import Document, documents_of, namespace_for
from catalog.config import Config, JwtConfig, SpecConfig, VisibilityConfig, decode_config
from catalog.errors import ConfigError
from catalog.model import SchemeUse, SecurityPolicy, SecurityScheme
from catalog.visibility import PUBLIC_KEY, Presented, Verdict, partition, visibility_key
from examples.backend import DEMO_AUDIENCE, DEMO_ISSUER, DEMO_SECRET, demo_token
from server.identity.caller import Caller, caller_from_headers
from server.identity.credentials import EXCHANGE_MARK
from server.identity.secrets import Secrets, resolve_secrets

OAUTH = SecurityScheme(name="orders_auth", type="oauth2")
API_KEY = SecurityScheme(name="key", type="apiKey", location="header", parameter="X-Api-Key")
QUERY_KEY = SecurityScheme(name="qkey", type="apiKey", location="query", parameter="api_key")
BASIC = SecurityScheme(name="basic", type="http", scheme="basic")


def policy(namespace: str, scheme: SecurityScheme, *scopes: str) -> SecurityPolicy:
    return SecurityPolicy(
        namespace=namespace, alternatives=((SchemeUse(scheme=scheme, scopes=scopes),),)
    )


READ = policy("", OAUTH, "orders:read")
WRITE = policy("", OAUTH, "orders:write")
ADMIN = policy("", OAUTH, "orders:admin")
POLICIES = {visibility_key(p): p for p in (READ, WRITE, ADMIN)}
JWT_SPEC = SpecConfig(
    namespace="",
    jwt=JwtConfig(issuer=DEMO_ISSUER, audience=DEMO_AUDIENCE, hs256_secret_env="DEMO_SECRET"),
)
DEMO_CONFIG = Config(specs={"orders.yaml": JWT_SPEC})
DEMO_SECRETS = resolve_secrets(
    DEMO_CONFIG, environ={"DEMO_SECRET": DEMO_SECRET}, read_file=lambda _: b""
)


DEMO_ORIGIN = "http://127.0.0.1:8080"
ORIGINS = {
    "orders.yaml": (DEMO_ORIGIN,),
    "svc.yaml": ("https://svc.test:443",),
    "github.json": ("https://api.github.com:443",),
    "slack.yaml": ("https://slack.com:443",),
    "legacy.yaml": ("http://legacy.test:80",),
}


def documents(config: Config, *sources: str) -> dict[str, Document]:
    return documents_of(sources, ORIGINS, config)


def demo_caller(headers: dict[str, str], *, config: Config = DEMO_CONFIG) -> Caller:
    return caller_from_headers(
        headers,
        config=config,
        documents=documents(config, "orders.yaml"),
        policies=POLICIES,
        secrets=DEMO_SECRETS
        if config is DEMO_CONFIG
        else resolve_secrets(config, environ={"DEMO_SECRET": DEMO_SECRET}, read_file=lambda _: b""),
    )


def verdicts(caller: Caller) -> tuple[Verdict, Verdict, Verdict]:
    read, write, admin = (caller.audience.verdict(visibility_key(p)) for p in (READ, WRITE, ADMIN))
    return read, write, admin


def test_two_tokens_see_different_audiences() -> None:
    alice = demo_caller({"Authorization": f"Bearer {demo_token('alice')}"})
    bob = demo_caller({"authorization": f"Bearer {demo_token('bob')}"})
    admin = demo_caller({"Authorization": f"Bearer {demo_token('admin')}"})
    assert verdicts(alice) == (Verdict.VISIBLE, Verdict.VISIBLE, Verdict.HIDDEN)
    assert verdicts(bob) == (Verdict.VISIBLE, Verdict.HIDDEN, Verdict.HIDDEN)
    assert verdicts(admin) == (Verdict.VISIBLE,) * 3
    assert alice.audience != bob.audience
    assert (alice.id, bob.id, admin.id) == ("alice", "bob", "admin")
    assert alice.presented[""]["orders_auth"].verified


def test_no_credential_sees_public_only() -> None:
    nobody = demo_caller({})
    assert verdicts(nobody) == (Verdict.HIDDEN,) * 3
    assert nobody.audience.verdict(PUBLIC_KEY) is Verdict.VISIBLE
    assert nobody.forwarded == {}
    assert nobody.id is None


def test_missing_credentials_shown_uncertain_when_configured() -> None:
    config = msgspec.structs.replace(
        DEMO_CONFIG, visibility=VisibilityConfig(missing_credentials="uncertain")
    )
    assert verdicts(demo_caller({}, config=config)) == (Verdict.UNCERTAIN,) * 3
    # a verified token lacking a scope is still hidden: the scope decides
    bob = demo_caller({"Authorization": f"Bearer {demo_token('bob')}"}, config=config)
    assert verdicts(bob) == (Verdict.VISIBLE, Verdict.HIDDEN, Verdict.HIDDEN)


@pytest.mark.parametrize(
    "token",
    [
        demo_token("alice", secret="another-secret-that-is-long-enough-0123456789"),
        demo_token("alice", lifetime_seconds=-3600),
        jwt.encode(
            {
                "sub": "alice",
                "scope": "orders:read",
                "iss": "https://evil",
                "aud": DEMO_AUDIENCE,
                "exp": int(time.time()) + 60,
            },
            DEMO_SECRET,
            algorithm="HS256",
        ),
    ],
    ids=["bad-signature", "expired", "wrong-issuer"],
)
def test_a_jwt_the_key_rejects_counts_as_not_presented(token: str) -> None:
    caller = demo_caller({"Authorization": f"Bearer {token}"})
    assert verdicts(caller) == (Verdict.HIDDEN,) * 3
    assert caller.id is None
    # it is still forwarded: the backend answers for itself
    headers, _, _ = caller.forwarded_for("orders.yaml", DEMO_ORIGIN).placed(READ)
    assert headers == (("Authorization", f"Bearer {token}"),)


def test_an_opaque_token_is_uncertain_without_a_verifier() -> None:
    # This test used to give the opaque token to the demo config, which has a verifier,
    # and expect it uncertain: that was issue 21's finding 5. Without a verifier an opaque
    # token is still only the backend's to judge.
    config = Config(specs={"orders.yaml": SpecConfig(namespace="")})
    caller = demo_caller({"Authorization": "Bearer opaque-demo-token"}, config=config)
    assert verdicts(caller) == (Verdict.UNCERTAIN,) * 3
    assert not caller.presented[""]["orders_auth"].verified


@pytest.mark.parametrize(
    "token",
    [
        "x",
        "opaque-demo-token",
        demo_token("admin") + ".extra",  # a valid JWT with a fourth segment
        "a.b",
        "",
    ],
    ids=["one-letter", "opaque", "four-segments", "two-segments", "empty"],
)
def test_a_token_the_verifier_cannot_verify_never_widens_visibility(token: str) -> None:
    # Issue 21, finding 5: with a verifier configured, a bearer token it cannot verify is
    # treated exactly as one that failed verification: admin-only operations stay
    # hidden, not authUncertain.
    caller = demo_caller({"Authorization": f"Bearer {token}"})
    rejected = demo_caller({"Authorization": f"Bearer {demo_token('admin', secret='x' * 40)}"})
    assert verdicts(caller) == verdicts(rejected) == (Verdict.HIDDEN,) * 3
    assert caller.audience.uncertain == frozenset()
    assert caller.presented == {}


def test_without_jwt_config_a_jwt_is_unverified() -> None:
    config = Config(specs={"orders.yaml": SpecConfig(namespace="")})
    caller = demo_caller({"Authorization": f"Bearer {demo_token('alice')}"}, config=config)
    assert verdicts(caller) == (Verdict.UNCERTAIN,) * 3
    assert caller.id is None


def test_authorization_of_the_wrong_kind_is_not_a_bearer_credential() -> None:
    caller = demo_caller({"Authorization": "Basic YWxpY2U6cHc="})
    assert verdicts(caller) == (Verdict.HIDDEN,) * 3


def multi(config: Config, headers: dict[str, str]) -> Caller:
    policies = {
        visibility_key(p): p
        for p in (policy("github", OAUTH), policy("slack", API_KEY), policy("legacy", BASIC))
    }
    return caller_from_headers(
        headers,
        config=config,
        documents=documents(config, "github.json", "slack.yaml", "legacy.yaml"),
        policies=policies,
        secrets=Secrets(),
    )


def test_with_several_namespaces_nothing_is_forwarded_by_default() -> None:
    caller = multi(Config(), {"Authorization": "Bearer ghp_x", "X-Api-Key": "k"})
    assert caller.forwarded == {}
    assert caller.presented == {}
    assert caller.audience.visible == {PUBLIC_KEY}


def test_forward_headers_route_credentials_to_one_namespace_only() -> None:
    config = Config(
        specs={
            "github.json": SpecConfig(forward_headers=("Authorization",)),
            "slack.yaml": SpecConfig(forward_headers=("X-Api-Key",)),
        }
    )
    caller = multi(config, {"Authorization": "Bearer ghp_x", "x-api-key": "k", "Cookie": "c=1"})
    github = caller.forwarded_for("github.json", ORIGINS["github.json"][0])
    slack = caller.forwarded_for("slack.yaml", ORIGINS["slack.yaml"][0])
    assert github.placed(policy("github", OAUTH))[0] == (("Authorization", "Bearer ghp_x"),)
    assert slack.placed(policy("slack", API_KEY))[0] == (("X-Api-Key", "k"),)
    assert caller.forwarded_for("legacy.yaml", ORIGINS["legacy.yaml"][0]).placed(
        policy("legacy", BASIC)
    ) == ((), (), ())
    # bound to the document's origin: another origin gets nothing
    assert caller.forwarded_for("github.json", ORIGINS["slack.yaml"][0]).placed(
        policy("github", OAUTH)
    ) == ((), (), ())
    assert set(caller.presented) == {"github", "slack"}
    github_key = visibility_key(policy("github", OAUTH))
    slack_key = visibility_key(policy("slack", API_KEY))
    assert caller.audience.uncertain == {github_key, slack_key}


def test_credentials_name_the_inbound_header_and_the_scheme_places_it() -> None:
    config = Config(
        specs={"svc.yaml": SpecConfig(namespace="svc", credentials={"qkey": "X-Svc-Key"})}
    )
    qpolicy = policy("svc", QUERY_KEY)
    caller = caller_from_headers(
        {"X-Svc-Key": "s3cret", "Authorization": "Bearer not-for-svc"},
        config=config,
        documents=documents(config, "svc.yaml"),
        policies={visibility_key(qpolicy): qpolicy},
        secrets=Secrets(),
    )
    headers, query, _ = caller.forwarded_for("svc.yaml", ORIGINS["svc.yaml"][0]).placed(qpolicy)
    assert query == (("api_key", "s3cret"),)
    # The inbound header carries the scheme's credential, so it goes where the scheme
    # says and nowhere else (it used to be forwarded as a header as well: a credential
    # sent twice, once where the document never asked for it). Authorization is still
    # forwarded, by the single-origin default: no scheme of this document reads it.
    assert headers == (("Authorization", "Bearer not-for-svc"),)
    assert caller.audience.verdict(visibility_key(qpolicy)) is Verdict.UNCERTAIN


@pytest.mark.parametrize(
    ("header", "verdict"),
    [("X-Svc-Key", Verdict.UNCERTAIN), ("X Svc Key", Verdict.HIDDEN), ("X:Key", Verdict.HIDDEN)],
)
def test_an_api_key_whose_header_name_cannot_be_sent_is_not_presented(
    header: str, verdict: Verdict
) -> None:
    # The document names the header; one that is no RFC 9110 token refuses every call
    # that would send it (server.invoke.request.build_request, naming it), so it unlocks nothing.
    scheme = SecurityScheme(name="key", type="apiKey", location="header", parameter=header)
    config = Config(specs={"svc.yaml": SpecConfig(namespace="svc", credentials={"key": "X-Key"})})
    key_policy = policy("svc", scheme)
    caller = caller_from_headers(
        {"X-Key": "s3cret"},
        config=config,
        documents=documents(config, "svc.yaml"),
        policies={visibility_key(key_policy): key_policy},
        secrets=Secrets(),
    )
    forwarded = caller.forwarded_for("svc.yaml", ORIGINS["svc.yaml"][0])
    assert (header, "s3cret") in forwarded.placed(key_policy)[0]  # refused, not dropped
    assert caller.presented == (
        {"svc": {"key": Presented()}} if verdict is Verdict.UNCERTAIN else {}
    )
    assert caller.audience.verdict(visibility_key(key_policy)) is verdict


def test_basic_credential_is_uncertain() -> None:
    config = Config(specs={"legacy.yaml": SpecConfig(forward_headers=("Authorization",))})
    caller = multi(config, {"Authorization": "Basic YWxpY2U6cHc="})
    assert caller.audience.uncertain == {visibility_key(policy("legacy", BASIC))}


def test_header_values_with_line_breaks_are_dropped() -> None:
    caller = demo_caller({"Authorization": "Bearer a\r\nX-Evil: 1"})
    assert caller.forwarded == {}


def test_credentials_never_appear_in_repr() -> None:
    token = demo_token("alice")
    caller = demo_caller({"Authorization": f"Bearer {token}"})
    assert token not in repr(caller)
    assert token not in repr(caller.forwarded)
    assert token not in str(caller.forwarded_for("orders.yaml", DEMO_ORIGIN))
    assert token not in repr(caller.forwarded["orders.yaml"].credentials)
    secrets = resolve_secrets(
        Config(specs={"a.yaml": SpecConfig(static_headers={"X-Team": "TEAM"})}),
        environ={"TEAM": "hush"},
        read_file=lambda _: b"",
    )
    assert secrets.static_headers == {"a.yaml": (("X-Team", "hush"),)}
    assert "hush" not in repr(secrets)


def test_namespaces_follow_the_config() -> None:
    config = Config(specs={"orders.yaml": SpecConfig(namespace="")})
    assert namespace_for("orders.yaml", config) == ""
    assert namespace_for("amazonaws.com/ec2.json", config) == "amazonaws_com_ec2"


def test_unset_environment_variables_fail_at_start_up() -> None:
    with pytest.raises(ConfigError, match="DEMO_SECRET"):
        resolve_secrets(DEMO_CONFIG, environ={}, read_file=lambda _: b"")
    with pytest.raises(ConfigError, match="TEAM"):
        resolve_secrets(
            Config(specs={"a.yaml": SpecConfig(static_headers={"X-Team": "TEAM"})}),
            environ={},
            read_file=lambda _: b"",
        )


def test_jwks_file_verifies_rs256_tokens() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_jwk: dict[str, Any] = json.loads(
        jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key())
    )
    public_jwk.update(kid="k1", alg="RS256", use="sig")
    files = {"keys.json": json.dumps({"keys": [public_jwk]}).encode()}
    config = Config(
        specs={
            "orders.yaml": SpecConfig(
                namespace="", jwt=JwtConfig(audience=DEMO_AUDIENCE, jwks_file="keys.json")
            )
        }
    )
    secrets = resolve_secrets(config, environ={}, read_file=files.__getitem__)
    claims: dict[str, str | int] = {
        "sub": "carol",
        "scope": "orders:read orders:admin",
        "aud": DEMO_AUDIENCE,
    }
    claims["exp"] = int(time.time()) + 60
    token = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k1"})
    caller = caller_from_headers(
        {"Authorization": f"Bearer {token}"},
        config=config,
        documents=documents(config, "orders.yaml"),
        policies=POLICIES,
        secrets=secrets,
    )
    assert verdicts(caller) == (Verdict.VISIBLE, Verdict.HIDDEN, Verdict.VISIBLE)
    assert caller.id == "carol"
    with pytest.raises(ConfigError, match="jwks_file"):
        resolve_secrets(config, environ={}, read_file=lambda _: b"not json")


def test_verified_tokens_are_cached_until_they_expire() -> None:
    verifier = DEMO_SECRETS.verifiers["orders.yaml"]
    token = demo_token("alice", lifetime_seconds=60)
    claims = verifier.verify(token)
    assert claims is not None
    assert verifier.verify(token) is claims  # the signature is checked once
    assert verifier.verify(token, now=claims["exp"] + 31) is None  # past exp and leeway


SCHEMES = (OAUTH, API_KEY, BASIC)
MISSING_MODES: tuple[Literal["hide", "uncertain"], ...] = ("hide", "uncertain")


@st.composite
def catalogs(draw: st.DrawFn) -> tuple[Config, dict[str, Document], dict[str, SecurityPolicy]]:
    namespaces = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, unique=True))
    policies = {}
    for namespace in namespaces:
        for _ in range(draw(st.integers(0, 3))):
            alternatives = draw(
                st.lists(
                    st.lists(
                        st.builds(
                            SchemeUse,
                            scheme=st.sampled_from(SCHEMES),
                            scopes=st.lists(st.sampled_from(["r", "w"]), max_size=2).map(tuple),
                        ),
                        max_size=2,
                    ).map(tuple),
                    max_size=2,
                ).map(tuple)
            )
            p = SecurityPolicy(namespace=namespace, alternatives=alternatives)
            policies[visibility_key(p)] = p
    forwarding = draw(st.lists(st.sampled_from(namespaces), unique=True))
    mode = draw(st.sampled_from(MISSING_MODES))
    config = Config(
        visibility=VisibilityConfig(missing_credentials=mode),
        specs={
            f"{n}.yaml": SpecConfig(forward_headers=("Authorization", "X-Api-Key"))
            for n in forwarding
        },
    )
    origins = {f"{n}.yaml": (f"http://{n}.test:80",) for n in namespaces}
    return config, documents_of(origins, origins, config), policies


@settings(max_examples=100, deadline=None)
@given(
    catalog=catalogs(),
    authorization=st.sampled_from([None, "Bearer opaque", "Basic YTpi"]),
    api_key=st.sampled_from([None, "k"]),
)
def test_the_planned_audience_equals_partition(
    catalog: tuple[Config, dict[str, Document], dict[str, SecurityPolicy]],
    authorization: str | None,
    api_key: str | None,
) -> None:
    config, namespaces, policies = catalog
    headers = {}
    if authorization:
        headers["Authorization"] = authorization
    if api_key:
        headers["X-Api-Key"] = api_key
    secrets = Secrets()
    for _ in range(2):  # the second call uses the cached plan
        caller = caller_from_headers(
            headers, config=config, documents=namespaces, policies=policies, secrets=secrets
        )
        expected = partition(
            policies, caller.presented, missing=config.visibility.missing_credentials
        )
        assert caller.audience == expected


@pytest.mark.parametrize("length", [1, 16, 31])
def test_an_hs256_secret_shorter_than_32_bytes_is_refused_at_start(length: int) -> None:
    # RFC 7518 §3.2: a key of the hash's size at least; a short one is guessable.
    with pytest.raises(ConfigError, match="at least 32") as info:
        resolve_secrets(DEMO_CONFIG, environ={"DEMO_SECRET": "s" * length}, read_file=lambda _: b"")
    assert "DEMO_SECRET" in str(info.value)
    resolve_secrets(DEMO_CONFIG, environ={"DEMO_SECRET": "s" * 32}, read_file=lambda _: b"")


def test_a_namespace_over_two_origins_routes_nothing_to_either_document() -> None:
    # Start-up refuses it; a reload can still bring it in. Before, the namespace's one
    # route sent the first document's forwarded Authorization to the second's host.
    config = Config(
        specs={
            "a.json": SpecConfig(namespace="x", forward_headers=("Authorization",)),
            "b.json": SpecConfig(namespace="x"),
        }
    )
    origins = {"a.json": ("http://a.test:80",), "b.json": ("http://b.test:80",)}
    shared = policy("x", OAUTH)
    caller = caller_from_headers(
        {"Authorization": "Bearer for-a"},
        config=config,
        documents=documents_of(origins, origins, config),
        policies={visibility_key(shared): shared},
        secrets=Secrets(),
    )
    assert caller.forwarded == {}
    assert caller.presented == {}


def test_connection_bound_authorization_is_neither_forwarded_nor_presented() -> None:
    config = Config(specs={"orders.yaml": SpecConfig(namespace="")})
    caller = demo_caller({"Authorization": "Negotiate YIIBhgYGKwYBBQUCoII"}, config=config)
    assert caller.forwarded == {}
    assert verdicts(caller) == (Verdict.HIDDEN,) * 3


# -- issue 23: a token present but invalid is a 401, and [auth] tokens are not passed on --


def test_a_token_a_spec_verifier_refuses_is_rejected_unless_a_route_takes_it_opaque() -> None:
    bad = f"Bearer {demo_token('alice', lifetime_seconds=-3600)}"
    assert demo_caller({"Authorization": bad}).rejected
    assert demo_caller({"Authorization": "Bearer not-a-jwt"}).rejected
    good = demo_caller({"Authorization": f"Bearer {demo_token('alice')}"})
    assert (good.rejected, good.authenticated) == (False, True)
    assert not demo_caller({}).rejected
    assert not demo_caller({"Authorization": "Basic YWxpY2U6cHc="}).rejected
    # svc.yaml takes Authorization with no verifier: there the token is the backend's to
    # judge, so the request goes on (and the token still counts as none for orders.yaml).
    config = Config(
        specs={
            "orders.yaml": msgspec.structs.replace(JWT_SPEC, forward_headers=("Authorization",)),
            "svc.yaml": SpecConfig(namespace="svc", forward_headers=("Authorization",)),
        }
    )
    mixed = caller_from_headers(
        {"Authorization": bad},
        config=config,
        documents=documents(config, "orders.yaml", "svc.yaml"),
        policies=POLICIES,
        secrets=resolve_secrets(
            config, environ={"DEMO_SECRET": DEMO_SECRET}, read_file=lambda _: b""
        ),
    )
    assert not mixed.rejected
    assert verdicts(mixed) == (Verdict.HIDDEN,) * 3


RESOURCE = "https://gateway.test/mcp"
ISSUER = "https://as.test"


def _resource_server(
    identity: Literal["passthrough", "token_exchange", "static"] | None,
) -> tuple[Config, Secrets, Any]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_jwk: dict[str, Any] = json.loads(
        jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key())
    )
    public_jwk.update(kid="k1", alg="RS256", use="sig")
    files = {"keys.json": json.dumps({"keys": [public_jwk]}).encode()}
    toml = (
        f'[auth]\nresource = "{RESOURCE}"\n'
        f'[[auth.authorization_servers]]\nissuer = "{ISSUER}"\njwks_file = "keys.json"\n'
        'token_endpoint = "https://as.test/token"\n'
        '[specs."orders.yaml"]\nnamespace = ""\n'
    )
    if identity is not None:
        toml += f'identity = "{identity}"\n'
    if identity == "token_exchange":
        toml += 'exchange = { audience = "https://orders.test" }\n'
    config = decode_config(toml.encode(), file="t.toml")
    return config, resolve_secrets(config, environ={}, read_file=files.__getitem__), private


def _rs_token(private: Any, *, audience: str = RESOURCE, lifetime: int = 60) -> str:
    claims = {
        "sub": "carol",
        "iss": ISSUER,
        "aud": audience,
        "scope": "orders:read",
        "exp": int(time.time()) + lifetime,
    }
    return jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k1"})


@pytest.mark.parametrize("identity", [None, "passthrough", "token_exchange", "static"])
def test_a_resource_server_token_reaches_a_backend_only_as_its_identity_says(
    identity: Literal["passthrough", "token_exchange", "static"] | None,
) -> None:
    config, secrets, private = _resource_server(identity)
    token = _rs_token(private)
    caller = caller_from_headers(
        {"Authorization": f"Bearer {token}"},
        config=config,
        documents=documents(config, "orders.yaml"),
        policies=POLICIES,
        secrets=secrets,
    )
    assert (caller.id, caller.rejected, caller.authenticated) == ("carol", False, True)
    assert caller.verified is not None
    headers, _, _ = caller.forwarded_for("orders.yaml", DEMO_ORIGIN).placed(READ)
    sent = dict(headers).get("Authorization")
    expected = {
        None: None,
        "passthrough": f"Bearer {token}",
        "token_exchange": f"Bearer {EXCHANGE_MARK}",
        "static": None,
    }[identity]
    assert sent == expected
    assert token not in repr(caller)
    # The caller's scopes decide visibility wherever the backend gets some credential.
    if identity is None:
        assert verdicts(caller) == (Verdict.HIDDEN,) * 3
    else:
        assert verdicts(caller) == (Verdict.VISIBLE, Verdict.HIDDEN, Verdict.HIDDEN)


def test_a_token_the_resource_server_refuses_is_rejected_even_beside_opaque_routes() -> None:
    config, secrets, private = _resource_server(None)
    config = msgspec.structs.replace(
        config,
        specs={
            **config.specs,
            "svc.yaml": SpecConfig(namespace="svc", forward_headers=("Authorization",)),
        },
    )
    for token in (
        _rs_token(private, audience="https://elsewhere.test"),
        _rs_token(private, lifetime=-3600),
        "opaque",
    ):
        caller = caller_from_headers(
            {"Authorization": f"Bearer {token}"},
            config=config,
            documents=documents(config, "orders.yaml", "svc.yaml"),
            policies=POLICIES,
            secrets=secrets,
        )
        assert caller.rejected
        assert caller.verified is None
