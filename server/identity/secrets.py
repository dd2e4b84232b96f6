"""What the gateway reads once at start-up: static headers from the environment, JWT
keys (secrets and JWKS files or URLs), the ``[auth]`` resource server and its client
secrets. Never logged: :class:`Secrets` hides them from ``repr``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Final

import jwt
import msgspec

from catalog.config import Config, JwtConfig
from catalog.errors import ConfigError
from catalog.model import has_control
from server.identity.jwt_verifier import JwtVerifier
from server.identity.plans import PlanCache
from server.identity.resource_server import ResourceServer, resource_verifier_config

__all__ = ["Secrets", "resolve_secrets"]

MIN_HS256_SECRET_BYTES: Final = 32
"""RFC 7518 §3.2: an HS256 key must be at least as long as the hash output (256 bits)."""


class Secrets(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`resolve_secrets` read at start-up, keyed by spec source.

    ``static_headers`` are sent to that spec's backend on every call (never logged).
    """

    verifiers: dict[str, JwtVerifier] = msgspec.field(default_factory=dict)
    static_headers: dict[str, tuple[tuple[str, str], ...]] = msgspec.field(default_factory=dict)
    plans: PlanCache = msgspec.field(default_factory=lambda: PlanCache())
    """Per-catalog identity plans (:func:`caller_from_headers`); not a secret."""
    resource: ResourceServer | None = None
    """The ``[auth]`` resource server, when configured."""
    client_secrets: dict[str, str] = msgspec.field(default_factory=dict)
    """Issuer → the gateway's client secret there (token exchange)."""

    def __repr__(self) -> str:
        return f"Secrets(verifiers={sorted(self.verifiers)}, static_headers=<hidden>)"

    @property
    def verifies(self) -> bool:
        """Whether the gateway verifies tokens at all (then it publishes its metadata)."""
        return self.resource is not None or bool(self.verifiers)


def resolve_secrets(
    config: Config,
    *,
    environ: Mapping[str, str],
    read_file: Callable[[str], bytes],
    fetch: Callable[[str], bytes] | None = None,
) -> Secrets:
    """Resolve the environment variables and key files the config names, once, at start-up.

    Args:
        config: the decoded config.
        environ: the process environment (``os.environ``).
        read_file: reads a JWKS file named in the config (relative paths as the caller
            resolves them).
        fetch: reads a ``jwks_url`` now; None leaves such a server without keys until
            :meth:`server.identity.resource_server.ResourceServer.refresh` reads them (the app's
            start-up does, before the first request).

    Raises:
        ConfigError: a named environment variable is unset, or a JWKS file or URL is
            unusable.
    """
    verifiers: dict[str, JwtVerifier] = {}
    static: dict[str, tuple[tuple[str, str], ...]] = {}
    for source, spec in config.specs.items():
        where = f'specs."{source}"'
        if spec.static_headers:
            headers = []
            for header, variable in sorted(spec.static_headers.items()):
                value = environ.get(variable)
                if value is None:
                    raise ConfigError(
                        "config", f"{where}.static_headers.{header}: ${variable} unset"
                    )
                if has_control(value):
                    raise ConfigError(
                        "config", f"{where}.static_headers.{header}: a control character in value"
                    )
                # Header strings stand for their bytes, one character each (as inbound
                # headers are read): the variable's own bytes are what the backend gets.
                headers.append((header, os.fsencode(value).decode("latin-1")))
            static[source] = tuple(headers)
        if spec.jwt is not None:
            verifiers[source] = _verifier(spec.jwt, where, environ=environ, read_file=read_file)
    resource, client_secrets = _resource_server(
        config, environ=environ, read_file=read_file, fetch=fetch
    )
    return Secrets(
        verifiers=verifiers,
        static_headers=static,
        resource=resource,
        client_secrets=client_secrets,
    )


def _resource_server(
    config: Config,
    *,
    environ: Mapping[str, str],
    read_file: Callable[[str], bytes],
    fetch: Callable[[str], bytes] | None,
) -> tuple[ResourceServer | None, dict[str, str]]:
    auth = config.auth
    if auth.resource is None:
        return None, {}
    verifiers: dict[str, JwtVerifier] = {}
    secrets: dict[str, str] = {}
    for i, server in enumerate(auth.authorization_servers):
        where = f"auth.authorization_servers[{i}]"
        jwks: jwt.PyJWKSet | None = None
        try:
            if server.jwks_file is not None:
                jwks = jwt.PyJWKSet.from_json(read_file(server.jwks_file).decode())
            elif server.jwks_url is not None and fetch is not None:
                jwks = jwt.PyJWKSet.from_json(fetch(server.jwks_url).decode())
        except (OSError, ValueError, TimeoutError, jwt.PyJWTError) as exc:
            key = "jwks_file" if server.jwks_file is not None else "jwks_url"
            raise ConfigError("config", f"{where}.{key}: {exc or type(exc).__name__}") from exc
        verifiers[server.issuer] = JwtVerifier(resource_verifier_config(auth, server), jwks=jwks)
        if server.client_secret_env:
            secret = environ.get(server.client_secret_env)
            if not secret:
                raise ConfigError(
                    "config", f"{where}.client_secret_env: ${server.client_secret_env} unset"
                )
            secrets[server.issuer] = secret
    return ResourceServer(auth, verifiers), secrets


def _verifier(
    config: JwtConfig,
    where: str,
    *,
    environ: Mapping[str, str],
    read_file: Callable[[str], bytes],
) -> JwtVerifier:
    if config.hs256_secret_env:
        secret = environ.get(config.hs256_secret_env)
        if not secret:
            raise ConfigError(
                "config", f"{where}.jwt.hs256_secret_env: ${config.hs256_secret_env} unset"
            )
        key = os.fsencode(secret)
        if len(key) < MIN_HS256_SECRET_BYTES:
            raise ConfigError(
                "config",
                f"{where}.jwt.hs256_secret_env: ${config.hs256_secret_env} holds {len(key)} "
                f"bytes; an HS256 secret needs at least {MIN_HS256_SECRET_BYTES} (RFC 7518 §3.2)",
            )
        return JwtVerifier(config, secret=key)
    if config.jwks_file:
        try:
            jwks = jwt.PyJWKSet.from_json(read_file(config.jwks_file).decode())
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            raise ConfigError("config", f"{where}.jwt.jwks_file: {exc}") from exc
        return JwtVerifier(config, jwks=jwks)
    raise ConfigError("config", f"{where}.jwt: set hs256_secret_env or jwks_file")
