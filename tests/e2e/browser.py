"""Helpers for the browser tests: watch a page for problems, log in through the form, save screenshots."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import ConsoleMessage, Page, Request, Response, expect

from tests.utils.personas import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
DOC_SCREENSHOTS = ROOT / "docs" / "screenshots"


@dataclass
class PageProblems:
    """What went wrong on the page since the last `reset()`: console errors, uncaught exceptions, failed requests."""

    origin: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    bad_responses: list[str] = field(default_factory=list)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.console_errors.append(f"{message.text} @ {message.location.get('url', '')}")

    def on_page_error(self, error) -> None:
        self.page_errors.append(str(error))

    def on_request_failed(self, request: Request) -> None:
        self.failed_requests.append(f"{request.method} {request.url}: {request.failure}")

    def on_response(self, response: Response) -> None:
        if response.status >= 400 and self._same_origin(response.url):
            self.bad_responses.append(f"{response.status} {response.request.method} {response.url}")

    def _same_origin(self, url: str) -> bool:
        return urlsplit(url)[:2] == urlsplit(self.origin)[:2]

    @classmethod
    def watch(cls, page: Page, origin: str) -> PageProblems:
        problems = cls(origin=origin)
        page.on("console", problems.on_console)
        page.on("pageerror", problems.on_page_error)
        page.on("requestfailed", problems.on_request_failed)
        page.on("response", problems.on_response)
        return problems

    def reset(self) -> None:
        for problems in (self.console_errors, self.page_errors, self.failed_requests, self.bad_responses):
            problems.clear()

    def assert_clean(self, where: str = "") -> None:
        found = {
            "console errors": self.console_errors,
            "page errors": self.page_errors,
            "failed requests": self.failed_requests,
            "responses >= 400": self.bad_responses,
        }
        found = {kind: items for kind, items in found.items() if items}
        assert not found, f"problems on {where or 'the page'}: {found}"


def log_in(page: Page, username: str) -> None:
    """Log in through the real form and land on the overview."""
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Welcome, {username}")
    # Let the overview finish loading (plotly is deferred): leaving it at once aborts that request, and the
    # problem watcher rightly counts an aborted request as a failure.
    page.wait_for_load_state("load")


def screenshot(page: Page, name: str, *, docs: bool = False) -> Path:
    """Save a screenshot of the page: a full page under test-artifacts/e2e/ by default.

    `docs=True` marks one of the README's screenshots: with SCREENSHOTS=1 in the environment it is written
    to docs/screenshots/ instead, as the 1440 × 900 viewport (no animations, no caret), so that a normal test
    run never changes the committed images and a deliberate re-shoot gives the same set of files.
    """
    if docs and os.environ.get("SCREENSHOTS") == "1":
        DOC_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = DOC_SCREENSHOTS / f"{name}.png"
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(path), full_page=False, animations="disabled", caret="hide")
        return path
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def main_nav(page: Page, name: str) -> None:
    """Follow a link of the main navigation bar, as a user moves between sections; wait until the section's page
    has loaded its scripts, so that moving on at once never aborts one (a failed request for PageProblems)."""
    page.get_by_role("navigation", name="Main navigation").get_by_role("link", name=name, exact=True).click()
    page.wait_for_load_state("load")
