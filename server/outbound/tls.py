"""TLS contexts for backends: the CA bundle and client certificate a spec's config names.

Built once per backend pool (``server.invoke.sender``), and once at start-up for every spec that
names TLS files (``server.__main__``), so that a missing or unreadable file stops the
server with the spec and the reason named instead of failing its first call.
"""

from __future__ import annotations

import ssl

from catalog.config import Config

__all__ = ["tls_context", "tls_problems"]


def tls_context(
    ca_bundle: str | None, client_cert: str | None, client_key: str | None
) -> ssl.SSLContext:
    """A client context that checks the backend against ``ca_bundle`` (the system's
    certificates when None) and presents ``client_cert`` when given.

    Raises:
        OSError: a file cannot be read, or is not a usable PEM file (``ssl.SSLError``).
    """
    context = ssl.create_default_context(cafile=ca_bundle)
    if client_cert:
        context.load_cert_chain(client_cert, client_key)
    return context


def tls_problems(config: Config) -> list[str]:
    """Why the TLS files of each spec that names some cannot be used; empty when all can."""
    problems = []
    for source, spec in sorted(config.specs.items()):
        if spec.ca_bundle or spec.client_cert:
            try:
                tls_context(spec.ca_bundle, spec.client_cert, spec.client_key)
            except OSError as exc:  # ssl's own errors name no file: say which were read
                named = ", ".join(
                    f for f in (spec.ca_bundle, spec.client_cert, spec.client_key) if f
                )
                problems.append(f"specs.{source!r}: TLS files {named} cannot be used ({exc})")
    return problems
