"""Who sees which operation: security requirements × the caller's credentials.

Pure: no I/O, no JWT library. The server's ``identity`` module turns request headers
into :class:`Presented` credentials (verifying a JWT when the config says how); this
module only decides. Search, load and invoke all call :func:`decide`, so a hidden tool is
hidden the same way everywhere (docs/decisions.md, Visibility).

Theory of operation:

* An operation is public when it has no security requirement, or one of its alternatives
  is empty (``{}``): visible to everyone.
* Otherwise each alternative is a conjunction of schemes. An alternative is *satisfied*
  when every scheme in it was presented and, where the credential was verified, carries
  the scopes required. It is *uncertain* when every scheme was presented but at least one
  credential could not be evaluated (an opaque token for a spec without a JWT verifier,
  an API key only the backend can check; with a verifier, ``server.identity`` never
  presents a token it cannot verify). It *fails* when a verified credential lacks a
  scope, and is *missing* when a scheme was not presented at all.
* The operation's verdict is the best of its alternatives: visible > uncertain > hidden.
  A missing credential hides the operation, unless the config shows such operations as
  uncertain (public catalogs); a verified credential lacking a scope always hides it.

Operations are grouped by *visibility key*: every operation with the same policy shares
one key, so the index filters on a handful of key terms instead of evaluating each
document.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from typing import Final, Literal

import msgspec

from catalog.model import SecurityPolicy

__all__ = [
    "PUBLIC_KEY",
    "Audience",
    "Presented",
    "Verdict",
    "decide",
    "partition",
    "visibility_hash",
    "visibility_key",
]

PUBLIC_KEY: Final = "public"


class Verdict(enum.IntEnum):
    """Ordered so that ``max`` picks the best alternative."""

    HIDDEN = 0  # indistinguishable from a tool that does not exist
    UNCERTAIN = 1  # listed and callable, with authUncertain: true
    VISIBLE = 2  # listed and callable


class Presented(msgspec.Struct, frozen=True, kw_only=True):
    """A credential the caller presented for one security scheme.

    ``verified`` is true only when the server checked it (a JWT with a configured key);
    then ``scopes`` are the token's scopes and decide. Unverified credentials make the
    operation uncertain, never hidden.
    """

    verified: bool = False
    scopes: frozenset[str] = frozenset()


class Audience(msgspec.Struct, frozen=True, kw_only=True):
    """What one caller may see, as sets of visibility keys; every other key is hidden."""

    visible: frozenset[str] = frozenset({PUBLIC_KEY})
    uncertain: frozenset[str] = frozenset()

    def verdict(self, key: str) -> Verdict:
        """The verdict for an operation with visibility key ``key``."""
        if key in self.visible:
            return Verdict.VISIBLE
        if key in self.uncertain:
            return Verdict.UNCERTAIN
        return Verdict.HIDDEN


_ENCODER: Final = msgspec.json.Encoder(order="deterministic")


def visibility_key(policy: SecurityPolicy) -> str:
    """``"public"``, or the namespace and a 12-hex digest of the canonical policy."""
    if policy.is_public:
        return PUBLIC_KEY
    digest = hashlib.sha256(_ENCODER.encode(policy)).hexdigest()[:12]
    return f"{policy.namespace}:{digest}"


def visibility_hash(key: str) -> int:
    """A visibility key as the u64 that card documents carry in the ``visk`` fast field,
    so a search checks a page's candidates with one fast-field read. A collision (odds
    ~1e-13 among thousands of keys) cannot reveal a tool: the page's own stored keys
    are checked again.
    """
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


def decide(
    policy: SecurityPolicy,
    presented: Mapping[str, Presented],
    *,
    missing: Literal["hide", "uncertain"] = "hide",
) -> Verdict:
    """The verdict for one caller on one policy.

    Args:
        policy: the operation's security requirement.
        presented: scheme name → credential, for the policy's namespace.
        missing: what a caller who lacks a credential entirely sees.
    """
    if policy.is_public:
        return Verdict.VISIBLE
    best = Verdict.HIDDEN
    only_missing = True  # every failing alternative failed for lack of a credential
    for alternative in policy.alternatives:
        verdict = Verdict.VISIBLE
        for use in alternative:
            credential = presented.get(use.scheme.name)
            if credential is None:
                verdict = Verdict.HIDDEN
                break
            if credential.verified:
                if not set(use.scopes) <= credential.scopes:
                    verdict = Verdict.HIDDEN
                    only_missing = False
                    break
            else:
                verdict = Verdict.UNCERTAIN
        best = max(best, verdict)
    if best is Verdict.HIDDEN and missing == "uncertain" and only_missing:
        return Verdict.UNCERTAIN
    return best


def partition(
    policies: Mapping[str, SecurityPolicy],
    presented_for: Mapping[str, Mapping[str, Presented]],
    *,
    missing: Literal["hide", "uncertain"] = "hide",
) -> Audience:
    """Split visibility keys into visible and uncertain for one caller; the rest are hidden.

    Args:
        policies: visibility key → policy, as the index's meta record lists them.
        presented_for: namespace → the caller's credentials for that namespace.
        missing: see :func:`decide`.
    """
    visible: set[str] = {PUBLIC_KEY}
    uncertain: set[str] = set()
    for key, policy in policies.items():
        verdict = decide(policy, presented_for.get(policy.namespace, {}), missing=missing)
        if verdict is Verdict.VISIBLE:
            visible.add(key)
        elif verdict is Verdict.UNCERTAIN:
            uncertain.add(key)
    return Audience(visible=frozenset(visible), uncertain=frozenset(uncertain))
