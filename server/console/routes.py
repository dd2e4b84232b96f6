"""The console's routes: ``/console/...`` behind the operator token, rendered with Jinja2.

:func:`console_router` is mounted by ``server/app.py`` only when ``[console] enabled``;
:func:`console_templates` is the app's template engine then. Every route passes the same
Host check as ``/mcp`` (``server/ops.py``). Every page, data and partial route needs the
operator (``auth.py``): a browser asking for a page without it is sent to the login
form, anything else gets 401. Only the login form and the static files (the console's
own script and style and the vendored libraries: no catalog data) are served without it.

Every answer carries a strict Content-Security-Policy: scripts, styles, images and
requests from this origin only, no inline script or style anywhere (the pages use
none), no framing. The routes read and never write: the POSTs are the login, the logout
and a playground run (a search).
"""

from __future__ import annotations

import hmac
import time
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import jinja2
import msgspec
from litestar import Request, Router, get, post
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Response, Template
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from server.console.auth import (
    COOKIE,
    LOGIN,
    cookie_header,
    expired_cookie_header,
    is_session,
    next_path,
    same_origin,
)
from server.console.catalog import Filters, catalog_page
from server.console.facts import FactsCache
from server.console.overview import overview, problems
from server.console.playground import empty_page, form_of, run_playground
from server.console.tool import tool_page
from server.console.traffic import traffic_page
from server.ops import host_refusal, is_operator
from server.state import ServerState

__all__ = ["console_router", "console_templates"]

HERE: Final = Path(__file__).resolve().parent
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS: Final = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # same-origin, not no-referrer: under no-referrer a browser posts a form with
    # "Origin: null", and a POST must name its origin (auth.py).
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)
_NAMES: Final = frozenset(name for name, _ in _HEADERS)
_CROSS_ORIGIN: Final = Response(
    b'{"error":"cross-origin"}', status_code=403, media_type="application/json"
)
_FACTS: Final = "console_facts"
_JSON: Final = msgspec.json.Encoder()

Req = Request[Any, Any, Any]


def secure_headers(app: ASGIApp) -> ASGIApp:
    """Middleware: every console answer (pages, redirects, refusals, static files) goes
    out with :data:`_HEADERS`, replacing any of the same name.
    """

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", ()) if k.lower() not in _NAMES]
                message["headers"] = [*kept, *_HEADERS]
            await send(message)

        await app(scope, receive, sending)

    return middleware


def console_templates() -> TemplateConfig[JinjaTemplateEngine]:
    """The app's template engine: the console's templates, autoescaped, strict about
    undefined names (a typo in a template fails its test, never renders empty).
    """
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["utc"] = _utc
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def _partial(request: Req) -> bool:
    """Whether htmx asks for a fragment of the page, not the whole page."""
    return request.headers.get("hx-request") == "true"


def _query(request: Req, name: str) -> str:
    """A query parameter's value, stripped (empty when absent)."""
    return str(request.query_params.get(name, "")).strip()


def _number(request: Req, name: str) -> int:
    """A page number from the query (1 when absent or not a number)."""
    value = _query(request, name)
    return int(value) if value.isdigit() and len(value) < 10 else 1


def _page(name: str, nav: str, status: int = 200, **context: Any) -> Template:
    return Template(template_name=name, context={"nav": nav, **context}, status_code=status)


def _state(request: Req) -> ServerState:
    state: ServerState = request.app.state.server
    return state


def _facts(request: Req) -> FactsCache:
    """The app's :class:`FactsCache`, made on the first console request."""
    facts: FactsCache | None = request.app.state.get(_FACTS)
    if facts is None:
        facts = request.app.state[_FACTS] = FactsCache(_state(request))
    return facts


def _authorized(request: Req) -> bool:
    cookie = request.cookies.get(COOKIE)
    return is_operator(request) or is_session(_state(request).ops_token, cookie, now=time.time())


def _host_checked(request: Req) -> Response[bytes] | None:
    return host_refusal(request)


def _operator_only(request: Req) -> Response[bytes] | Redirect | None:
    """Before every page: the Host check, then the operator, then (for a POST) the
    Origin (``auth.py``).
    """
    refused = host_refusal(request)
    if refused is not None:
        return refused
    if not _authorized(request):
        accept = request.headers.get("accept", "")
        if request.method == "GET" and "text/html" in accept and not _partial(request):
            path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return Redirect(f"{LOGIN}?next={quote(path, safe='')}", status_code=303)
        return Response(
            b'{"error":"unauthorized"}',
            status_code=401,
            media_type="application/json",
            headers={"www-authenticate": 'Bearer realm="sezzlee console"', "hx-redirect": LOGIN},
        )
    if request.method == "POST" and not same_origin(request.headers):
        return _CROSS_ORIGIN
    return None


# -- the login form (no operator yet) ----------------------------------------------------


@get("/login", sync_to_thread=False)
def login_form(request: Req) -> Template:
    """The login form."""
    return _page("login.html", "login", next=next_path(_query(request, "next")), failed=False)


@post("/login", status_code=303)
async def login(request: Req) -> Template | Redirect | Response[bytes]:
    """Check the token typed; on success, the session cookie and on to ``next``."""
    if not same_origin(request.headers):
        return _CROSS_ORIGIN
    form = await request.form()
    given = str(form.get("token", "")).strip()
    target = next_path(str(form.get("next", "")))
    state = _state(request)
    token = state.ops_token
    if token is None or not hmac.compare_digest(given.encode(), token.encode()):
        return _page("login.html", "login", status=401, next=target, failed=True)
    secure = request.url.scheme == "https"
    lifetime = state.config.console.session_seconds
    cookie = cookie_header(token, now=time.time(), lifetime=lifetime, secure=secure)
    return Redirect(target, status_code=303, headers={"set-cookie": cookie})


# -- the pages (the operator only) ---------------------------------------------------------


@post("/logout", status_code=303, sync_to_thread=False)
def logout(request: Req) -> Redirect:
    """End the session."""
    cookie = expired_cookie_header(secure=request.url.scheme == "https")
    return Redirect(LOGIN, status_code=303, headers={"set-cookie": cookie})


@get(["/", ""], sync_to_thread=False)
def overview_page(request: Req) -> Template:
    """The Overview."""
    return _page("overview.html", "overview", page=overview(_state(request), _facts(request)))


@get("/problems", sync_to_thread=False)
def problems_page(request: Req) -> Template:
    """Every problem of one code."""
    data = problems(_facts(request), _query(request, "code"), _number(request, "page"))
    return _page("problems.html", "overview", page=data)


@get("/catalog", sync_to_thread=False)
def catalog(request: Req) -> Template:
    """The Catalog (its listing alone for htmx)."""
    filters = Filters(
        namespace=_query(request, "namespace"),
        document=_query(request, "document"),
        tag=_query(request, "tag"),
        key=_query(request, "key"),
        page=_number(request, "page"),
    )
    data = catalog_page(_facts(request), filters)
    name = "_catalog_listing.html" if _partial(request) else "catalog.html"
    return _page(name, "catalog", page=data)


@get("/tools/{name:str}", sync_to_thread=False)
def tool(request: Req) -> Template:
    """One tool."""
    data = tool_page(_state(request), _facts(request), str(request.path_params["name"]))
    return _page("tool.html", "catalog", status=200 if data.found else 404, page=data)


@get("/playground", sync_to_thread=False)
def playground_form(request: Req) -> Template:
    """The Search playground's form."""
    page = empty_page(_state(request), _facts(request), form_of({}))
    return _page("playground.html", "playground", page=page)


@post("/playground", status_code=200)
async def playground(request: Req) -> Template:
    """A playground run (its result alone for htmx). The pasted credential is read here
    and handed on, never kept.
    """
    posted = await request.form()
    values = {k: str(v) for k, v in posted.items() if k != "credential"}
    data = await run_playground(
        _state(request), _facts(request), form_of(values), str(posted.get("credential", ""))
    )
    name = "_playground_result.html" if _partial(request) else "playground.html"
    return _page(name, "playground", page=data)


@get("/traffic", sync_to_thread=False)
def traffic(request: Req) -> Template:
    """The Traffic page."""
    return _page("traffic.html", "traffic", page=traffic_page(_state(request)))


@get("/traffic/data", sync_to_thread=False)
def traffic_data(request: Req) -> Response[bytes]:
    """The Traffic page's figures, for its charts."""
    body = _JSON.encode(traffic_page(_state(request)))
    return Response(body, media_type="application/json")


@get("/traffic/lines", sync_to_thread=False)
def traffic_lines(request: Req) -> Template:
    """The Traffic page's tables, refreshed by htmx."""
    return _page("_traffic_lines.html", "traffic", page=traffic_page(_state(request)))


def console_router() -> Router:
    """Every ``/console`` route; each reads the app's ``ServerState``."""
    static = create_static_files_router(path="/static", directories=[HERE / "static"])
    public = Router("/", route_handlers=[login_form, login, static], before_request=_host_checked)
    private = Router(
        "/",
        route_handlers=[
            logout,
            overview_page,
            problems_page,
            catalog,
            tool,
            playground_form,
            playground,
            traffic,
            traffic_data,
            traffic_lines,
        ],
        before_request=_operator_only,
    )
    return Router("/console", route_handlers=[public, private], middleware=[secure_headers])
