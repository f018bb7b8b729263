"""Browser fixtures for the end-to-end tests: one headless Debian Chromium for the whole e2e package.

The tests drive pytest-django's `live_server` (a real HTTP server on a thread of this process) with
Playwright's sync API. That API keeps an asyncio loop marked as running on the main thread while it
is started, so Django would refuse every ORM call made from the test (SynchronousOnlyOperation), the
test-database setup and the per-test flush included. The ORM here is really synchronous, so
DJANGO_ALLOW_ASYNC_UNSAFE is set exactly while Playwright runs, and Playwright is package-scoped so
that neither outlives tests/e2e and the unit tests collected after it keep Django's safety check.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from tests.e2e.browser import PageProblems
from tests.utils.personas import Personas, build_personas

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The size of the README's screenshots (tests/e2e/browser.py: screenshot).
VIEWPORT = {"width": 1440, "height": 900}
# Generous for a loaded 2-core CI machine; a healthy page answers in well under a second.
TIMEOUT_MS = 10_000


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    pw = sync_playwright().start()
    # Assertions wait as long as actions: a status block polling every 3 s may take a few seconds more to show
    # a change on a loaded machine (Playwright's default for expect is 5 s).
    expect.set_options(timeout=TIMEOUT_MS)
    try:
        yield pw
    finally:
        pw.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="package")
def chromium(playwright: Playwright) -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (never a downloaded browser)")
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    yield browser
    browser.close()


@pytest.fixture
def personas_live(transactional_db) -> Personas:
    """The shared personas, committed so the live server's thread sees them (the `personas` fixture uses `db`)."""
    return build_personas()


@pytest.fixture
def context(chromium: Browser, live_server) -> Iterator[BrowserContext]:
    ctx = chromium.new_context(base_url=live_server.url, viewport=VIEWPORT, locale="en-US")
    ctx.set_default_timeout(TIMEOUT_MS)
    ctx.set_default_navigation_timeout(TIMEOUT_MS)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    page = context.new_page()
    yield page
    page.close()


@pytest.fixture
def problems(page: Page, live_server) -> PageProblems:
    """Records console errors, uncaught exceptions, failed requests and same-origin 4xx/5xx responses of `page`."""
    return PageProblems.watch(page, origin=live_server.url)
