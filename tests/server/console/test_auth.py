"""Who gets into the console: the operator token, as a bearer header or through the login
form's session cookie, and nobody else, on every console route."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from server.console.auth import (
    COOKIE,
    cookie_header,
    is_session,
    next_path,
    same_origin,
)
from tests.server.console.catalog import OPS_TOKEN
from tests.server.console.conftest import OPERATOR
from tests.server.harness import ServerThread

PUBLIC_PATHS = ("/console/login", "/console/static/{file_path:path}")


def _console_routes(console: ServerThread) -> list[tuple[str, str]]:
    """Every (method, path) the app serves under /console but the login form and the
    static files, path parameters filled: a new route is covered without naming it.
    """
    found = []
    for route in console.app.routes:
        if not route.path.startswith("/console") or route.path in PUBLIC_PATHS:
            continue
        for method in sorted(getattr(route, "methods", ())):
            if method in ("HEAD", "OPTIONS"):
                continue
            found.append((method, route.path.replace("{name:str}", "get_health")))
    return found


def test_every_console_route_refuses_a_request_without_the_token(console: ServerThread) -> None:
    routes = _console_routes(console)
    assert {path for _, path in routes} >= {
        "/console",
        "/console/catalog",
        "/console/playground",
        "/console/traffic",
        "/console/traffic/data",
        "/console/tools/get_health",
    }
    origin = {"origin": console.base}
    wrong = [
        {},
        {"authorization": "Bearer not-the-token"},
        {"authorization": f"Basic {OPS_TOKEN}"},
        {"cookie": f"{COOKIE}=9999999999.forged"},
        {"cookie": f"{COOKIE}={OPS_TOKEN}"},
    ]
    for method, path in routes:
        for headers in wrong:
            answer = httpx.request(method, console.base + path, headers={**origin, **headers})
            assert answer.status_code == 401, (method, path, headers)
            assert answer.json() == {"error": "unauthorized"}
            page = httpx.request(
                method, console.base + path, headers={**origin, **headers, "accept": "text/html"}
            )
            if method == "GET":  # a browser is sent to the login form
                assert page.status_code == 303, (method, path)
                assert page.headers["location"].startswith("/console/login?next=")
            else:
                assert page.status_code == 401


def test_the_bearer_token_opens_every_page(console: ServerThread) -> None:
    for method, path in _console_routes(console):
        if method == "GET":
            answer = httpx.get(console.base + path, headers=OPERATOR)
            assert answer.status_code == 200, path


def test_the_login_form_sets_a_session_cookie_that_is_not_the_token(
    console: ServerThread,
) -> None:
    origin = {"origin": console.base}
    with httpx.Client(base_url=console.base) as client:
        refused = client.post(
            "/console/login", data={"token": "guess", "next": "/console/catalog"}, headers=origin
        )
        assert refused.status_code == 401
        assert COOKIE not in refused.cookies
        assert "guess" not in refused.text
        answer = client.post(
            "/console/login", data={"token": OPS_TOKEN, "next": "/console/catalog"}, headers=origin
        )
        assert answer.status_code == 303
        assert answer.headers["location"] == "/console/catalog"
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        assert "Path=/console" in cookie
        assert OPS_TOKEN not in cookie
        assert client.get("/console/catalog").status_code == 200
        client.post("/console/logout", headers=origin)
        assert client.get("/console/catalog").status_code == 401


def test_a_post_from_another_origin_is_refused(console: ServerThread) -> None:
    for headers in ({}, {"origin": "http://evil.example"}, {"origin": "null"}):
        login = httpx.post(
            console.base + "/console/login", data={"token": OPS_TOKEN}, headers=headers
        )
        assert login.status_code == 403
        assert "set-cookie" not in login.headers
        run = httpx.post(
            console.base + "/console/playground",
            data={"query": "x"},
            headers={**OPERATOR, **headers},
        )
        assert run.status_code == 403


def test_every_answer_carries_the_content_security_policy(console: ServerThread) -> None:
    for path in ("/console/login", "/console/static/console.css", "/console/catalog"):
        answer = httpx.get(console.base + path, headers=OPERATOR)
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy
        assert "script-src 'self'" in policy
        assert "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_wrong_host_is_refused_before_anything(console: ServerThread) -> None:
    for path in ("/console/login", "/console/catalog"):
        answer = httpx.get(console.base + path, headers={**OPERATOR, "host": "evil.example"})
        assert answer.status_code == 421


def test_session_cookie_checks() -> None:
    now = time.time()
    header = cookie_header(OPS_TOKEN, now=now, lifetime=60, secure=True)
    value = header.split(";", 1)[0].split("=", 1)[1]
    assert header.endswith("; Secure")
    assert is_session(OPS_TOKEN, value, now=now)
    assert not is_session(OPS_TOKEN, value, now=now + 61)  # expired
    assert not is_session("another-token", value, now=now)  # the token changed
    assert not is_session(None, value, now=now)  # no token configured: nobody
    expires, _, mac = value.partition(".")
    assert not is_session(OPS_TOKEN, f"{int(expires) + 3600}.{mac}", now=now)  # extended


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("/console/catalog?tag=pets", "/console/catalog?tag=pets"),
        ("//evil.example/console", "/console/"),
        ("https://evil.example/console", "/console/"),
        ("/console\\..\\evil", "/console/"),
        ("/consolex", "/consolex"),
        ("/console/login", "/console/"),
        (None, "/console/"),
        ("/other", "/console/"),
    ],
)
def test_login_goes_on_only_to_console_paths(given: str | None, expected: str) -> None:
    assert next_path(given) == expected


@pytest.mark.parametrize(
    ("headers", "same"),
    [
        ({"origin": "http://127.0.0.1:8000", "host": "127.0.0.1:8000"}, True),
        ({"origin": "http://127.0.0.1:8001", "host": "127.0.0.1:8000"}, False),
        ({"origin": "http://evil.example", "host": "127.0.0.1:8000"}, False),
        ({"host": "127.0.0.1:8000"}, False),
        ({"origin": "null", "host": "127.0.0.1:8000"}, False),
    ],
)
def test_same_origin(headers: dict[str, Any], same: bool) -> None:
    assert same_origin(headers) is same
