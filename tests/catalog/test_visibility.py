from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from catalog.model import SchemeUse, SecurityPolicy, SecurityScheme
from catalog.visibility import (
    PUBLIC_KEY,
    Audience,
    Presented,
    Verdict,
    decide,
    partition,
    visibility_key,
)

BEARER = SecurityScheme(name="bearer", type="http", scheme="bearer")
OAUTH = SecurityScheme(name="oauth", type="oauth2")
KEY = SecurityScheme(name="key", type="apiKey", location="header", parameter="X-Api-Key")


def policy(*alternatives: tuple[SchemeUse, ...], namespace: str = "shop") -> SecurityPolicy:
    return SecurityPolicy(namespace=namespace, alternatives=alternatives)


def use(scheme: SecurityScheme, *scopes: str) -> SchemeUse:
    return SchemeUse(scheme=scheme, scopes=scopes)


def test_no_requirement_or_empty_alternative_is_public() -> None:
    assert decide(policy(), {}) is Verdict.VISIBLE
    assert decide(policy((), (use(BEARER),)), {}) is Verdict.VISIBLE
    assert visibility_key(policy((), (use(BEARER),))) == PUBLIC_KEY


def test_missing_credential_hides_unless_configured_uncertain() -> None:
    p = policy((use(BEARER),))
    assert decide(p, {}) is Verdict.HIDDEN
    assert decide(p, {}, missing="uncertain") is Verdict.UNCERTAIN


def test_unverifiable_credential_is_uncertain() -> None:
    p = policy((use(OAUTH, "orders:admin"),))
    assert decide(p, {"oauth": Presented()}) is Verdict.UNCERTAIN


def test_verified_scopes_decide() -> None:
    p = policy((use(OAUTH, "orders:admin"),))
    admin = Presented(verified=True, scopes=frozenset({"orders:admin", "orders:read"}))
    reader = Presented(verified=True, scopes=frozenset({"orders:read"}))
    assert decide(p, {"oauth": admin}) is Verdict.VISIBLE
    assert decide(p, {"oauth": reader}) is Verdict.HIDDEN
    # A verified token lacking the scope is never shown as uncertain.
    assert decide(p, {"oauth": reader}, missing="uncertain") is Verdict.HIDDEN


def test_alternatives_take_the_best_and_conjunctions_need_all() -> None:
    both = policy((use(BEARER), use(KEY)))
    assert decide(both, {"bearer": Presented()}) is Verdict.HIDDEN
    assert decide(both, {"bearer": Presented(), "key": Presented()}) is Verdict.UNCERTAIN
    either = policy((use(KEY),), (use(OAUTH, "r"),))
    verified = Presented(verified=True, scopes=frozenset({"r"}))
    assert decide(either, {"key": Presented(), "oauth": verified}) is Verdict.VISIBLE


def test_partition_groups_keys_per_namespace() -> None:
    shop = policy((use(BEARER),), namespace="shop")
    mail = policy((use(BEARER),), namespace="mail")
    policies = {visibility_key(shop): shop, visibility_key(mail): mail}
    audience = partition(policies, {"shop": {"bearer": Presented()}})
    assert audience.uncertain == {visibility_key(shop)}
    assert audience.visible == {PUBLIC_KEY}
    assert audience.verdict(visibility_key(mail)) is Verdict.HIDDEN
    assert audience.verdict(PUBLIC_KEY) is Verdict.VISIBLE
    assert Audience().verdict("shop:000000000000") is Verdict.HIDDEN


def test_key_depends_on_namespace_and_requirement() -> None:
    a = visibility_key(policy((use(BEARER),), namespace="a"))
    b = visibility_key(policy((use(BEARER),), namespace="b"))
    c = visibility_key(policy((use(OAUTH, "x"),), namespace="a"))
    assert len({a, b, c}) == 3
    assert a.startswith("a:")
    assert a == visibility_key(policy((use(BEARER),), namespace="a"))


scopes = st.frozensets(st.sampled_from(["a", "b", "c", "d"]))


@given(required=scopes, held=scopes)
def test_verified_visibility_is_scope_inclusion(
    required: frozenset[str], held: frozenset[str]
) -> None:
    p = policy((use(OAUTH, *sorted(required)),))
    verdict = decide(p, {"oauth": Presented(verified=True, scopes=held)})
    assert (verdict is Verdict.VISIBLE) == (required <= held)
    assert verdict is not Verdict.UNCERTAIN
