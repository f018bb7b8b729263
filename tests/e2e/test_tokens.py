"""A tenant admin creates an API token in the browser, uses it against the API, and revokes it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, Playwright, expect

from tests.e2e.browser import PageProblems, log_in, screenshot

pytestmark = pytest.mark.e2e


def test_token_is_shown_once_works_and_stops_working_when_revoked(
    page: Page, problems: PageProblems, playwright: Playwright, live_server, personas_live
):
    log_in(page, "ta-a")
    page.goto("/accounts/tokens/")
    expect(page.get_by_role("heading", level=1)).to_have_text("API tokens")

    form = page.locator("form", has=page.get_by_role("button", name="Create token"))
    # Found by their accessible names inside this form: the page's filter form has fields of the same names.
    form.get_by_role("textbox", name="Name").fill("e2e pipeline")
    form.get_by_role("combobox", name="Tenant").select_option(label="Org A (a)")
    form.get_by_role("combobox", name="Role").select_option("member")
    form.get_by_role("button", name="Create token").click()

    shown = page.get_by_test_id("new-token")
    expect(shown).to_be_visible()
    expect(page.get_by_role("alert").filter(has_text="Created token e2e pipeline")).to_be_visible()
    raw = page.locator("#new-token-value").inner_text().strip()
    assert re.fullmatch(r"gpuc_[A-Za-z0-9_-]{20,}", raw), raw
    row = page.locator("main table tbody tr", has_text="e2e pipeline")
    expect(row).to_contain_text("member @ a")
    expect(row).to_contain_text("ta-a")
    expect(row).to_contain_text("active")
    expect(row.locator("code")).to_have_text(f"{raw[:12]}…")  # only the prefix is listed
    screenshot(page, "token-created")

    # Shown once: reloading (the create redirected, so this is a GET, not a re-submitted form) shows the row only.
    assert page.url.endswith("/accounts/tokens/")
    page.reload()
    expect(page.locator("main table tbody tr", has_text="e2e pipeline")).to_have_count(1)
    expect(page.get_by_test_id("new-token")).to_have_count(0)
    assert raw not in page.content()
    problems.assert_clean("the token pages")

    api = playwright.request.new_context(base_url=live_server.url)
    try:
        bearer = {"Authorization": f"Bearer {raw}"}
        me = api.get("/api/v1/me/", headers=bearer)
        assert me.status == 200, me.text()
        body = me.json()
        assert body["username"] == "ta-a"
        assert body["token"] == {"name": "e2e pipeline", "prefix": raw[:12], "role": "member", "tenant": "a"}

        page.locator("main table tbody tr", has_text="e2e pipeline").get_by_role("button", name="Revoke").click()
        page.get_by_role("dialog").get_by_role("button", name="Revoke token").click()  # the dialog confirms it
        expect(page.get_by_role("alert").filter(has_text="Revoked token e2e pipeline")).to_be_visible()
        revoked = page.locator("main table tbody tr", has_text="e2e pipeline")
        expect(revoked).to_contain_text("revoked")
        expect(revoked.get_by_role("button", name="Revoke")).to_have_count(0)

        after = api.get("/api/v1/me/", headers=bearer)
        assert after.status == 401, after.text()
        assert "revoked" in after.text()
    finally:
        api.dispose()
    problems.assert_clean("the token pages")
