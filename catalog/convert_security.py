"""An operation's security requirements → its policy, and the parameters they supply.

A requirement naming a scheme the document does not declare fails closed: it stands as
a scheme no caller can present (docs/decisions.md, Caller identity).
"""

from __future__ import annotations

from typing import Any, Final

from catalog.convert_context import ConvertContext
from catalog.model import SchemeUse, SecurityPolicy, SecurityScheme

__all__ = ["SecuritySchemes", "credentials_of"]

SECURITY_SCHEME_UNKNOWN: Final = "security-scheme-unknown"
"""Warning code: a security requirement names a scheme the document does not declare."""
_SCHEME_TYPES: Final = frozenset(("apiKey", "http", "oauth2", "openIdConnect", "mutualTLS"))
_KEY_LOCATIONS: Final = frozenset(("header", "query", "cookie"))


class SecuritySchemes:
    """The document's security schemes, each read once, and the policies they make."""

    __slots__ = ("_doc", "_schemes")

    def __init__(self, doc: ConvertContext) -> None:
        self._doc = doc
        self._schemes: dict[str, SecurityScheme | None] = {}

    def policy(self, operation: dict[str, Any], pointer: str) -> SecurityPolicy:
        """The operation's policy (the document's when it declares none)."""
        requirements = operation.get("security", self._doc.tree.get("security"))
        if not isinstance(requirements, list):
            return SecurityPolicy(namespace=self._doc.namespace)
        alternatives: list[tuple[SchemeUse, ...]] = []
        for requirement in requirements:
            if not isinstance(requirement, dict):
                continue
            uses: list[SchemeUse] = []
            for scheme_name, scopes in requirement.items():
                scheme = self._scheme(scheme_name)
                if scheme is None:
                    # Fail closed: an undeclared scheme is one no caller can present, like a
                    # client certificate only the gateway holds. Dropping the alternative
                    # instead could leave none and publish a protected operation as public.
                    self._doc.warn(
                        f"{pointer}/security",
                        f"unknown security scheme {scheme_name!r}",
                        SECURITY_SCHEME_UNKNOWN,
                    )
                    scheme = SecurityScheme(name=scheme_name, type="mutualTLS")
                uses.append(
                    SchemeUse(
                        scheme=scheme,
                        scopes=tuple(s for s in scopes if isinstance(s, str))
                        if isinstance(scopes, list)
                        else (),
                    )
                )
            alternatives.append(tuple(uses))
        return SecurityPolicy(namespace=self._doc.namespace, alternatives=tuple(alternatives))

    def _scheme(self, name: str) -> SecurityScheme | None:
        if name in self._schemes:
            return self._schemes[name]
        if self._doc.v2:
            table = self._doc.tree.get("securityDefinitions")
        else:
            components = self._doc.tree.get("components")
            table = components.get("securitySchemes") if isinstance(components, dict) else None
        raw = table.get(name) if isinstance(table, dict) else None
        found = self._doc.resolver.follow(raw, self._doc.source)[0] if raw is not None else None
        scheme = _security_scheme(name, found) if isinstance(found, dict) else None
        self._schemes[name] = scheme
        return scheme


def credentials_of(policy: SecurityPolicy) -> frozenset[tuple[str, str]]:
    """(location, name) of the parameters a security scheme of the operation
    supplies: the caller's credentials, never arguments (docs/decisions.md).
    """
    found: set[tuple[str, str]] = set()
    for alternative in policy.alternatives:
        for use in alternative:
            scheme = use.scheme
            if scheme.type == "apiKey" and scheme.location and scheme.parameter:
                wire = scheme.parameter
                found.add((scheme.location, wire.lower() if scheme.location == "header" else wire))
    return frozenset(found)


def _security_scheme(name: str, raw: dict[str, Any]) -> SecurityScheme | None:
    kind = raw.get("type")
    if kind == "basic":  # Swagger 2.0
        return SecurityScheme(name=name, type="http", scheme="basic")
    if kind not in _SCHEME_TYPES:
        return None
    if kind == "apiKey":
        where = raw.get("in")
        parameter = raw.get("name")
        return SecurityScheme(
            name=name,
            type="apiKey",
            location=where if where in _KEY_LOCATIONS else None,
            parameter=parameter if isinstance(parameter, str) else None,
        )
    if kind == "http":
        scheme = raw.get("scheme")
        return SecurityScheme(
            name=name, type="http", scheme=scheme.lower() if isinstance(scheme, str) else None
        )
    return SecurityScheme(name=name, type=kind)
