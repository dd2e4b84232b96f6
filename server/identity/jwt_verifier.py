"""Bearer JWT checks for one spec: an HS256 secret or a JWKS key set, with a cache of
the tokens already verified (an agent sends the same token on every call).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

import jwt

from catalog.config import JwtConfig

__all__ = ["JwtVerifier"]

_ASYMMETRIC: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
)
_LEEWAY_SECONDS: Final = 30  # clock skew between the issuer and this host
_VERIFIED_CACHE: Final = 4096  # verified tokens kept per spec (a few MB at most)


class JwtVerifier:
    """Verifies bearer JWTs for one spec: an HS256 secret or a JWKS key set.

    Built once at start-up by :func:`resolve_secrets`; verification itself is pure.
    """

    __slots__ = ("_config", "_jwks", "_secret", "_verified")

    def __init__(
        self, config: JwtConfig, *, secret: bytes | None = None, jwks: jwt.PyJWKSet | None = None
    ) -> None:
        self._config = config
        self._secret = secret
        self._jwks = jwks
        # An agent sends the same token on every call; a signature check is the costly part
        # (bench_auth).
        self._verified: dict[str, dict[str, Any]] = {}

    def use_keys(self, jwks: jwt.PyJWKSet) -> None:
        """Verify with ``jwks`` from now on (a JWKS URL read again); tokens verified
        before stay verified until they expire.
        """
        self._jwks = jwks

    @property
    def has_keys(self) -> bool:
        return self._secret is not None or self._jwks is not None

    def verify(self, token: str, *, now: float | None = None) -> dict[str, Any] | None:
        """The token's claims when it verifies (and has not expired since), else None."""
        moment = time.time() if now is None else now
        claims = self._verified.get(token)
        if claims is not None:
            if moment <= claims["exp"] + _LEEWAY_SECONDS:
                return claims
            del self._verified[token]
            return None  # its exp is signed: it stays expired
        claims = self._check(token)
        if claims is not None and isinstance(claims.get("exp"), int | float):
            if len(self._verified) >= _VERIFIED_CACHE:
                del self._verified[next(iter(self._verified))]  # the oldest entry
            self._verified[token] = claims
        return claims

    def _check(self, token: str) -> dict[str, Any] | None:
        options = {"require": ["exp"], "verify_aud": self._config.audience is not None}
        try:
            if self._secret is not None:
                claims: dict[str, Any] = jwt.decode(
                    token,
                    self._secret,
                    algorithms=["HS256"],
                    audience=self._config.audience,
                    issuer=self._config.issuer,
                    leeway=_LEEWAY_SECONDS,
                    options=options,  # type: ignore[arg-type]  # pyjwt types options as a TypedDict
                )
                return claims
            if self._jwks is not None:
                header = jwt.get_unverified_header(token)
                key = self._pick(header.get("kid"))
                if key is None:
                    return None
                claims = jwt.decode(
                    token,
                    key.key,
                    algorithms=[key.algorithm_name] if key.algorithm_name else list(_ASYMMETRIC),
                    audience=self._config.audience,
                    issuer=self._config.issuer,
                    leeway=_LEEWAY_SECONDS,
                    options=options,  # type: ignore[arg-type]  # as above
                )
                return claims
        except jwt.PyJWTError:
            return None
        return None

    def scopes(self, claims: Mapping[str, Any]) -> frozenset[str]:
        """The scopes a verified token grants: a space-separated string or a list."""
        value = claims.get(self._config.scope_claim)
        if value is None and self._config.scope_claim == "scope":
            value = claims.get("scp")  # Azure AD / Okta spell it scp
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, list):
            return frozenset(str(v) for v in value)
        return frozenset()

    def _pick(self, kid: object) -> jwt.PyJWK | None:
        assert self._jwks is not None
        keys = self._jwks.keys
        if kid is None:
            return keys[0] if len(keys) == 1 else None
        return next((k for k in keys if k.key_id == kid), None)
