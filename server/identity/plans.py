"""The identity plan of one catalog: which documents' backends receive caller headers
(and which schemes they check), and what a caller who presented nothing sees, per
namespace. Built once per catalog view and shared by every request against it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Final

import msgspec

from catalog.backends import Document, conflicted_namespaces, route_conflicts, single_origin
from catalog.config import Config, SpecConfig
from catalog.model import SecurityPolicy, SecurityScheme
from catalog.visibility import PUBLIC_KEY, Audience, Presented, partition
from server.identity.credentials import carrier

__all__ = ["CredentialRoute", "IdentityPlan", "PlanCache"]

_log: Final = logging.getLogger("sezzlee.identity")


class CredentialRoute(msgspec.Struct, frozen=True, kw_only=True):
    """A document whose backend receives caller headers, and the schemes it checks."""

    source: str
    namespace: str
    origins: frozenset[str]
    forwarded: tuple[str, ...]
    lowered: frozenset[str]
    carriers: frozenset[str]
    """Forwarded headers (lower case) that carry a scheme's credential."""
    schemes: tuple[SecurityScheme, ...]


_EMPTY: Final[frozenset[str]] = frozenset()


class IdentityPlan:
    """What every request against one catalog shares; built once per catalog view."""

    __slots__ = (
        "_base",
        "_by_namespace",
        "_mode",
        "_parts",
        "opaque_authorization",
        "routes",
        "wanted",
    )

    def __init__(
        self,
        config: Config,
        documents: Mapping[str, Document],
        policies: Mapping[str, SecurityPolicy],
    ) -> None:
        single = single_origin(documents)
        # Refused at start (server.__main__, indexer --check); a reload can still bring
        # such a pair in, and then neither document receives anything until it is fixed.
        conflicted = conflicted_namespaces(documents, config)
        for problem in route_conflicts(documents, config):
            _log.error("credential routing refused", extra={"problem": problem})
        by_namespace: dict[str, dict[str, SecurityPolicy]] = {}
        for key, policy in policies.items():
            by_namespace.setdefault(policy.namespace, {})[key] = policy
        schemes = _schemes_by_namespace(policies.values())
        routes = []
        for source, document in sorted(documents.items()):
            if not document.origins or document.namespace in conflicted:
                continue
            spec = config.spec(source)
            forwarded = _forwarded_names(spec, single=single)
            if not forwarded:
                continue
            lowered = frozenset(name.lower() for name in forwarded)
            used = tuple(schemes.get(document.namespace, {}).values())
            routes.append(
                CredentialRoute(
                    source=source,
                    namespace=document.namespace,
                    origins=frozenset(document.origins),
                    forwarded=forwarded,
                    lowered=lowered,
                    carriers=frozenset(carrier(s, spec) for s in used) & lowered,
                    schemes=used,
                )
            )
        self.routes: tuple[CredentialRoute, ...] = tuple(routes)
        # Some backend takes Authorization without a verifier: there an unverifiable
        # token is an opaque credential, for the backend to judge.
        self.opaque_authorization = any(
            "authorization" in r.lowered and config.spec(r.source).jwt is None for r in routes
        )
        # Every inbound header (lower case) some route reads: no other is looked at.
        self.wanted: frozenset[str] = _EMPTY.union(*(r.lowered for r in routes))
        self._by_namespace = by_namespace
        # What a caller who presented nothing sees, whole and per namespace.
        self._mode = config.visibility.missing_credentials
        self._parts = {
            namespace: _split(partition(group, {}, missing=self._mode))
            for namespace, group in by_namespace.items()
        }
        self._base = Audience(
            visible=frozenset({PUBLIC_KEY}).union(*(v for v, _ in self._parts.values())),
            uncertain=_EMPTY.union(*(u for _, u in self._parts.values())),
        )

    def audience(self, presented: Mapping[str, Mapping[str, Presented]]) -> Audience:
        """Equal to ``partition(policies, presented, missing=...)``, in less time."""
        if not presented:
            return self._base
        visible, uncertain = set(self._base.visible), set(self._base.uncertain)
        for namespace, credentials in presented.items():
            was_visible, was_uncertain = self._parts.get(namespace, (_EMPTY, _EMPTY))
            visible -= was_visible
            uncertain -= was_uncertain
            now = partition(
                self._by_namespace.get(namespace, {}),
                {namespace: credentials},
                missing=self._mode,
            )
            visible |= now.visible
            uncertain |= now.uncertain
        return Audience(visible=frozenset(visible), uncertain=frozenset(uncertain))


def _split(audience: Audience) -> tuple[frozenset[str], frozenset[str]]:
    return audience.visible - {PUBLIC_KEY}, audience.uncertain


class PlanCache:
    """The plans of the last few catalogs (a reload briefly overlaps two views)."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[
            tuple[Config, Mapping[str, Document], Mapping[str, SecurityPolicy], IdentityPlan]
        ] = []

    def get(
        self,
        config: Config,
        documents: Mapping[str, Document],
        policies: Mapping[str, SecurityPolicy],
    ) -> IdentityPlan:
        """The plan for these objects (compared by identity), built on first use."""
        for c, d, p, plan in self._entries:
            if c is config and d is documents and p is policies:
                return plan
        plan = IdentityPlan(config, documents, policies)
        self._entries = [(config, documents, policies, plan), *self._entries[:2]]
        return plan


def _forwarded_names(spec: SpecConfig, *, single: bool) -> tuple[str, ...]:
    names: tuple[str, ...]
    if spec.forward_headers is msgspec.UNSET:
        names = ("Authorization",) if single else ()
    else:
        names = spec.forward_headers
    if spec.identity is not None and not any(n.lower() == "authorization" for n in names):
        # The spec asks for the caller's identity: the verified token is read from
        # Authorization (and then exchanged, replaced by a service credential or passed).
        names = (*names, "Authorization")
    return names + tuple(h for h in spec.credentials.values() if h not in names)


def _schemes_by_namespace(
    policies: Iterable[SecurityPolicy],
) -> dict[str, dict[str, SecurityScheme]]:
    found: dict[str, dict[str, SecurityScheme]] = {}
    for policy in policies:
        schemes = found.setdefault(policy.namespace, {})
        for alternative in policy.alternatives:
            for use in alternative:
                schemes.setdefault(use.scheme.name, use.scheme)
    return found
