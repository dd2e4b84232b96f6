"""What crosses the outbound client's edge, free of I/O: the request target as the client
writes it (:func:`requote`) and a backend's answer as it read it (:class:`BackendResponse`).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote

import msgspec

__all__ = ["BackendResponse", "requote"]

_URI_KEPT: Final = "!#$%&'()*+,/:;=?@[]~|"
"""What :func:`requote` keeps besides letters, digits and ``-._~``: RFC 3986's
reserved characters, ``%`` (of a ``%XX``) and ``|``."""
_STRAY_PERCENT: Final = re.compile(rb"%(?![0-9A-Fa-f]{2})")


class BackendResponse(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend answered, as read by the proxy (the body within its budget)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


def requote(raw: bytes) -> str:
    """``raw`` (a URL, or its path and query) with every byte a URI may not hold
    percent-encoded, as ``requests.utils.requote_uri`` does: a ``%XX`` already there is
    kept, a ``%`` that starts none is ``%25``, a space or a non-ASCII byte is ``%XX``.

    ``|`` is kept too: pipeDelimited's separator, as OpenAPI 3.0.3's style table spells
    it, and as ``server.invoke.request.build_request`` writes it. What it makes of a
    plain base URL and path template comes back unchanged: only what a document or a
    Location put there raw is encoded.
    """
    return quote(_STRAY_PERCENT.sub(b"%25", raw), safe=_URI_KEPT)
