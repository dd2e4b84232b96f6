"""The console in a real browser: Debian's chromium, driven by Playwright (pointed at the
system browser: Playwright's own download is never used, ``make browser-deps``).

Each page loads after the login form, shows the right data for the real index, logs no
console error (a Content-Security-Policy violation is one), fails no request, and passes
axe-core (npm, pinned in ``vendored.json``, injected into the page) with no serious or
critical violation. Every page's screenshot is saved under ``screenshots/console/``
(ignored by git).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, sync_playwright

from examples.backend import demo_token
from scripts.vendor import cached
from tests.server.console.catalog import HIDDEN, OPS_TOKEN, PUBLIC
from tests.server.harness import ServerThread
from tests.server.test_http import modern_post

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "screenshots" / "console"
SERIOUS = ("serious", "critical")


@pytest.fixture(scope="module")
def axe() -> str:
    """axe-core's script, fetched once at its pinned version and checked by hash."""
    return (cached(Path(__file__).parent / "vendored.json", "axe-core") / "axe.min.js").read_text()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).is_file():
        raise RuntimeError(f"{CHROMIUM} is missing: run make browser-deps")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Watched:
    """A logged-in page, and every console error, page error and failed request it had."""

    def __init__(self, context: BrowserContext, axe: str) -> None:
        self.context = context
        self.page = context.new_page()
        self.axe = axe
        self.errors: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                self.errors.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("requestfailed", self._failed)
        self.page.on(
            "response",
            lambda r: self.errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
        )

    def _failed(self, request: Any) -> None:
        # The browser's own icon fetch, cut short when the test navigates on at once.
        if request.url.endswith("/favicon.svg") and request.failure == "net::ERR_ABORTED":
            return
        self.errors.append(f"request failed: {request.url} {request.failure}")

    def check(self, name: str) -> None:
        """No error so far, no serious or critical axe violation; a screenshot."""
        self.page.wait_for_load_state("networkidle")
        assert self.errors == [], name
        self.page.evaluate(self.axe)  # DevTools evaluation: not subject to the page's CSP
        result: dict[str, Any] = self.page.evaluate(
            "axe.run(document, {resultTypes: ['violations']})"
        )
        serious = [
            (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
            for v in result["violations"]
            if v["impact"] in SERIOUS
        ]
        assert serious == [], name
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def watched(browser: Browser, console: ServerThread, axe: str) -> Iterator[Watched]:
    """A browser session logged in through the form."""
    context = browser.new_context(base_url=console.base, viewport={"width": 1280, "height": 900})
    try:
        seen = Watched(context, axe)
        page = seen.page
        page.goto("/console/catalog")
        assert re.search(r"/console/login\?next=", page.url)
        seen.errors.clear()  # the login form itself is checked below, not the redirect
        seen.check("login")
        page.fill("#token", OPS_TOKEN)
        page.click("button[type=submit]")
        page.wait_for_url("**/console/catalog")
        cookie = next(c for c in context.cookies() if c["name"] == "sezzlee_console")
        assert cookie["httpOnly"]
        assert cookie["sameSite"] == "Strict"
        assert OPS_TOKEN not in cookie["value"]
        seen.errors = [e for e in seen.errors if "HTTP 401" not in e]  # the login's own answer
        yield seen
    finally:
        context.close()


def test_overview_and_problems(watched: Watched) -> None:
    page = watched.page
    page.goto("/console/")
    assert page.inner_text("#tools").strip() == str(len(HIDDEN) + len(PUBLIC))
    assert "broken.yaml" in page.inner_text("#refused")
    watched.check("overview")
    page.click("#codes summary")
    assert "invalid YAML" in page.inner_text("#codes")
    page.goto("/console/problems?code=document-invalid")
    assert "broken.yaml" in page.inner_text("#problems")
    watched.check("problems")


def test_catalog_filters_with_htmx(watched: Watched) -> None:
    page = watched.page
    page.goto("/console/catalog")
    assert "orders.yaml" in page.inner_text("#documents")
    watched.check("catalog")
    page.fill("#namespace", "pets")
    page.click("form.filters button")
    page.wait_for_url("**namespace=pets**")
    assert "orders.yaml" not in page.inner_text("#documents")
    page.click("#documents a")
    page.wait_for_selector("#tools")
    assert "pets.adopt_pet" in page.inner_text("#tools")
    watched.check("catalog-tools")
    page.click("text=pets.adopt_pet")
    page.wait_for_url("**/console/tools/pets.adopt_pet")
    assert "X-Pet-Key" in page.inner_text("#schemes")
    watched.check("tool")


def test_tool_page(watched: Watched) -> None:
    page = watched.page
    page.goto("/console/tools/create_order")
    assert page.inner_text("#request").startswith("POST http://127.0.0.1:")
    assert '"name": "create_order"' in page.inner_text("#definition")
    watched.check("tool-secured")


def test_playground_as_anonymous_and_with_a_token(watched: Watched) -> None:
    page = watched.page
    page.goto("/console/playground")
    watched.check("playground-form")
    page.fill("#query", "order")
    page.fill("#limit", "50")
    page.check("#as-anonymous")
    page.click("form.playground button[type=submit]")
    page.wait_for_selector("#explain")
    result = page.inner_text("#result")
    assert "get_health" in result
    for name in HIDDEN:
        assert not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", result), name
    assert page.inner_text("#total").startswith("total 3")
    watched.check("playground-anonymous")
    token = demo_token("alice")
    page.check("#as-token")
    page.fill("#credential", token)
    page.click("form.playground button[type=submit]")
    # Functions, not expression strings: Playwright evaluates a string with eval, which the
    # console's Content-Security-Policy forbids.
    page.wait_for_function(
        "() => document.querySelector('#cards').innerText.includes('create_order')"
    )
    assert token not in page.content()
    watched.check("playground")


def _invoke(console: ServerThread, name: str) -> None:
    answer = modern_post(
        console, "tools/call", {"name": "invoke_tool", "arguments": {"name": name}}
    )
    assert answer.status_code == 200


def test_traffic_charts_refresh(watched: Watched, console: ServerThread) -> None:
    for _ in range(3):
        _invoke(console, "get_health")
    page = watched.page
    page.goto("/console/traffic")
    page.wait_for_function(
        "() => Chart.getChart('chart-tools')?.data.labels.includes('get_health')"
    )
    assert "get_health" in page.inner_text("#audit")
    _invoke(console, "no_such_tool")  # after the page loaded: the next refresh shows it
    page.wait_for_function(
        "() => Chart.getChart('chart-outcomes').data.labels.includes('unknown_tool')",
        timeout=15_000,
    )
    page.wait_for_function(
        "() => document.querySelector('#audit').innerText.includes('unknown_tool')",
        timeout=15_000,
    )
    latency = page.evaluate("() => Chart.getChart('chart-latency').data.datasets.map(d => d.label)")
    assert latency == ["p50", "p90", "p99"]
    watched.check("traffic")
