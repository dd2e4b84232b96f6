"""Who may use the console: the operator, by the ops token, and nobody else.

Pure: no I/O; ``routes.py`` hands over the header values and the clock.

Theory of operation:

* A request is the operator's when it carries ``Authorization: Bearer <ops token>``
  (what ``/readyz`` and ``/metrics`` take, ``server/ops.py``), or the session cookie the
  login form sets.
* The cookie never holds the token: it is ``<expiry>.<mac>``, the mac an HMAC-SHA256 of
  the expiry keyed by the token. It proves the token was typed once, ends at its
  expiry, and every session ends when the token changes. Any worker process checks it
  with nothing but the token, so no session store is shared. It is ``HttpOnly`` (no
  script reads it), ``SameSite=Strict`` (no other site's page sends it) and scoped to
  ``/console``.
* A POST (login, logout, a playground run) must come from a console page itself: its
  ``Origin`` names the host the request was sent to. With ``SameSite=Strict`` this is
  the CSRF defence (no token in forms to manage).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

__all__ = [
    "COOKIE",
    "LOGIN",
    "cookie_header",
    "expired_cookie_header",
    "is_session",
    "next_path",
    "same_origin",
]

COOKIE: Final = "sezzlee_console"
LOGIN: Final = "/console/login"
_PATH: Final = "/console"
_CONTEXT: Final = b"sezzlee console session\x00"  # keys this HMAC for this use alone


def _mac(token: str, expires: int) -> str:
    digest = hmac.new(token.encode(), _CONTEXT + str(expires).encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def cookie_header(token: str, *, now: float, lifetime: int, secure: bool) -> str:
    """The ``Set-Cookie`` value of a session that lasts ``lifetime`` seconds from ``now``."""
    expires = int(now) + lifetime
    flags = f"; Path={_PATH}; Max-Age={lifetime}; HttpOnly; SameSite=Strict"
    return f"{COOKIE}={expires}.{_mac(token, expires)}{flags}" + ("; Secure" if secure else "")


def expired_cookie_header(*, secure: bool) -> str:
    """The ``Set-Cookie`` value that ends the session (logout)."""
    flags = f"; Path={_PATH}; Max-Age=0; HttpOnly; SameSite=Strict"
    return f"{COOKIE}=" + flags + ("; Secure" if secure else "")


def is_session(token: str | None, value: str | None, *, now: float) -> bool:
    """Whether a cookie ``value`` is a live session of ``token`` (compared in constant
    time); never with no token configured.
    """
    if token is None or not value:
        return False
    expires, _, mac = value.partition(".")
    if not expires.isdigit() or len(expires) > 12 or int(expires) <= now:
        return False
    return hmac.compare_digest(mac.encode(), _mac(token, int(expires)).encode())


def same_origin(headers: Mapping[str, str]) -> bool:
    """Whether the request's ``Origin`` names the host it was sent to (its ``Host``):
    a form posted from a console page. A request without ``Origin`` is refused: every
    browser sends one with a POST.
    """
    origin = headers.get("origin")
    host = headers.get("host")
    if not origin or not host:
        return False
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


def next_path(value: str | None) -> str:
    """Where to go after logging in: a console path the login was sent from, never
    another site (``//evil.example``, a backslash), else the overview.
    """
    if (
        value
        and value.startswith(_PATH)
        and not value.startswith("//")
        and "\\" not in value
        and all(c.isprintable() and not c.isspace() for c in value)
        and value != LOGIN
    ):
        return value
    return _PATH + "/"
