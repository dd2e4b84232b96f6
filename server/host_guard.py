"""DNS-rebinding protection (docs/wire.md §9): the Host and Origin values a request
may carry. Pure: headers in, a refusal or None out.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

import msgspec

from server.jsonrpc import INVALID_REQUEST, Headers, Reply, error_reply, first_header

__all__ = ["Guard", "host_name"]


class Guard(msgspec.Struct, frozen=True, kw_only=True):
    """DNS-rebinding protection (§9): Host and Origin values accepted."""

    allowed_hosts: tuple[str, ...]  # lower case: a host name matches whatever its case
    allowed_origins: tuple[str, ...] = ()

    def check_headers(self, headers: Headers) -> Reply | None:
        """:meth:`check` of a request's headers: a repeated Host is no Host at all."""
        hosts = headers.get("host", ())
        return self.check(hosts[0] if len(hosts) == 1 else None, first_header(headers, "origin"))

    def check(self, host: str | None, origin: str | None) -> Reply | None:
        """None when both headers pass; else the 421 (Host) or 403 (Origin) answer.

        The Host value must be ``host[:port]`` and nothing else (RFC 9110 §7.2): a
        value like ``localhost:1@evil.example`` names no allowed host.
        """
        if "*" not in self.allowed_hosts and host_name(host or "") not in self.allowed_hosts:
            return error_reply(421, None, INVALID_REQUEST, "Invalid Host header")
        if origin is not None and not self._origin_allowed(origin):
            return error_reply(403, None, INVALID_REQUEST, "Invalid Origin header")
        return None

    def _origin_allowed(self, origin: str) -> bool:
        if "*" in self.allowed_origins or origin in self.allowed_origins:
            return True
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and parts.hostname in _LOOPBACK


_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})


_HOST: Final = re.compile(
    r"(?P<name>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::[0-9]{1,5})?"
)


def host_name(host: str) -> str | None:
    """The lower-cased name of a ``host[:port]`` Host value (``[::1]`` keeps its
    brackets); None for anything else: userinfo, a path, a second colon, spaces.
    """
    match = _HOST.fullmatch(host)
    return match["name"].lower() if match else None
