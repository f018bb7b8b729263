"""Keyboard and live behaviour in the browser: the skip link, a sortable header, a confirm dialog driven by the
keyboard, and an operation page that follows a server-side change without a reload."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from apps.operations.models import Operation
from tests.e2e.browser import PageProblems, log_in, screenshot

pytestmark = pytest.mark.e2e


def test_skip_link_is_the_first_stop_and_jumps_to_the_content(page: Page, problems: PageProblems, personas_live):
    log_in(page, "root")
    page.goto("/operations/")
    page.keyboard.press("Tab")
    skip = page.get_by_test_id("skip-link")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()  # hidden until focused, then shown
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#main$"))
    assert page.evaluate("document.activeElement.id") == "main"
    problems.assert_clean("skip link")


def test_a_header_click_sorts_the_list(page: Page, problems: PageProblems, personas_live):
    for kind in ("health.drain", "fleet.sync", "health.cordon"):
        Operation.objects.create(kind=kind, tenant=personas_live.a, status="succeeded")
    log_in(page, "root")
    page.goto("/operations/")
    kind_header = page.locator("th[data-col=kind]")
    expect(kind_header).not_to_have_attribute("aria-sort", re.compile("."))
    kind_header.get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"\?sort=kind$"))
    expect(page.locator("th[data-col=kind]")).to_have_attribute("aria-sort", "ascending")
    cells = page.locator("[data-testid=operation-list] tbody tr td:nth-child(2)")
    expect(cells).to_have_text(["fleet.sync", "health.cordon", "health.drain"])
    page.locator("th[data-col=kind]").get_by_role("link").click()
    expect(page.locator("th[data-col=kind]")).to_have_attribute("aria-sort", "descending")
    expect(cells).to_have_text(["health.drain", "health.cordon", "fleet.sync"])
    problems.assert_clean("sorting")


def test_confirm_dialog_works_from_the_keyboard(page: Page, problems: PageProblems, personas_live):
    token = personas_live.token_a
    log_in(page, "ta-a")
    page.goto("/accounts/tokens/")
    opener = page.get_by_test_id(f"revoke-token-{token.pk}-open")
    opener.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_test_id("confirm-impact")).to_contain_text(f"{token.prefix}… (acting as ci-a)")
    expect(dialog.get_by_label("Reason (optional)")).to_be_focused()
    screenshot(page, "confirm-revoke-token")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()  # focus goes back where it was
    token.refresh_from_db()
    assert token.revoked_at is None  # nothing happened
    opener.click()
    dialog.get_by_label("Reason (optional)").fill("rotated")
    dialog.get_by_label("Reason (optional)").press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("Revoked token ci")
    token.refresh_from_db()
    assert token.revoked_at is not None
    problems.assert_clean("confirm dialog")


def test_operation_page_follows_the_server_without_a_reload(page: Page, problems: PageProblems, personas_live):
    op = Operation.objects.create(
        kind="health.drain",
        tenant=personas_live.a,
        target_label="gpu-0002",
        status="running",
        progress=10,
        steps_done=0,
        steps_total=3,
        steps_label="workloads evicted",
    )
    log_in(page, "root")
    page.goto(f"/operations/{op.pk}/")
    expect(page.get_by_test_id("operation-status")).to_have_text("running")
    expect(page.get_by_test_id("operation-steps")).to_have_text("0 of 3 workloads evicted")
    page.evaluate("window.notReloaded = true")
    # The worker moves on: the page shows each step as it polls.
    Operation.objects.filter(pk=op.pk).update(steps_done=2, progress=66)
    expect(page.get_by_test_id("operation-steps")).to_have_text("2 of 3 workloads evicted")
    Operation.objects.filter(pk=op.pk).update(steps_done=3, progress=100, status="succeeded", log="drained\n")
    expect(page.get_by_test_id("operation-status")).to_have_text("succeeded")
    expect(page.get_by_test_id("operation-steps")).to_have_text("3 of 3 workloads evicted")
    assert page.evaluate("window.notReloaded") is True
    expect(page.get_by_test_id("operation-live")).not_to_have_attribute("hx-trigger", re.compile("."))  # done
    screenshot(page, "operation-live")
    problems.assert_clean("live operation")
