"""Every page of the web shell renders for the platform admin: headings, key content, no JS errors, no failed loads."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.browser import PageProblems, log_in, screenshot

pytestmark = pytest.mark.e2e


def visit(page: Page, problems: PageProblems, path: str, name: str, heading: str | re.Pattern) -> None:
    """Open `path`, check its main heading and that nothing failed, then save a full-page screenshot."""
    problems.reset()
    response = page.goto(path)
    assert response is not None and response.status == 200, f"{path}: {response and response.status}"
    expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    page.wait_for_load_state("load")
    screenshot(page, name)
    problems.assert_clean(path)


def scroll_to_operation(page: Page, path: str):
    """Swagger UI only renders the operations near the viewport of a large schema: scroll until `path` shows."""
    operation = page.locator("#swagger-ui .opblock-summary-path", has_text=path).first
    expect(page.locator("#swagger-ui .opblock-summary-path").first).to_be_visible()
    page.evaluate("window.scrollTo(0, 0)")
    for _ in range(60):
        if operation.count():
            break
        page.mouse.wheel(0, 600)
        page.wait_for_timeout(50)
    return operation


def test_platform_admin_visits_every_page(page: Page, problems: PageProblems, personas_live):
    log_in(page, "root")
    problems.assert_clean("log-in")
    nav = page.get_by_role("navigation", name="Main navigation")

    visit(page, problems, "/", "overview", "Welcome, root")
    expect(nav.get_by_role("link", name="Overview")).to_have_class(re.compile(r"\bactive\b"))
    expect(page.get_by_text("platform-admin")).to_be_visible()
    expect(page.get_by_role("link", name="user.login").first).to_be_visible()  # my own log-in, just now

    visit(page, problems, "/tenants/", "tenants", "Tenants")
    expect(nav.get_by_role("link", name="Tenants")).to_have_class(re.compile(r"\bactive\b"))
    rows = page.locator("main table tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="Team A1")).to_contain_text("Org A")  # the child shows its parent
    expect(page.get_by_role("link", name="New tenant")).to_be_visible()

    visit(page, problems, "/tenants/a/", "tenant-a", re.compile(r"^Org A\s+a$"))
    expect(page.get_by_role("link", name="Team A1")).to_be_visible()
    members = page.get_by_test_id("members")
    expect(members).to_contain_text("ta-a")
    expect(members).to_contain_text("member-a")
    expect(members).not_to_contain_text("member-b")
    expect(page.get_by_role("heading", name="Edit")).to_be_visible()

    visit(page, problems, "/tenants/new/", "tenant-new", "New tenant")
    fields = [("textbox", "Name *"), ("textbox", "Slug *"), ("combobox", "Parent"), ("textbox", "Description")]
    for role, name in fields:
        expect(page.get_by_role(role, name=name, exact=True)).to_be_visible()

    visit(page, problems, "/accounts/profile/", "profile", "Profile")
    permissions = page.get_by_test_id("effective-permissions")
    expect(permissions).to_contain_text("administer")
    expect(page.locator("main dl")).to_contain_text("root")

    visit(page, problems, "/accounts/memberships/", "memberships", "Memberships")
    expect(page.locator("main table tbody")).to_contain_text("member-b")
    expect(page.get_by_role("heading", name="Grant a role")).to_be_visible()
    expect(page.get_by_role("heading", name="New service account")).to_be_visible()

    visit(page, problems, "/accounts/tokens/", "tokens", "API tokens")
    token_row = page.locator("main table tbody tr", has_text="ci-a")
    expect(token_row).to_contain_text("member @ a")
    expect(token_row).to_contain_text("active")
    expect(page.get_by_test_id("new-token")).to_have_count(0)

    visit(page, problems, "/audit/", "audit", "Audit log")
    expect(nav.get_by_role("link", name="Audit")).to_have_class(re.compile(r"\bactive\b"))
    expect(page.locator("main table tbody")).to_contain_text("tenant.create")
    expect(page.locator("main table tbody")).to_contain_text("user.login")

    # An audit event's detail page, reached the way a user does: from the log.
    create_b = page.locator("main table tbody tr", has_text="tenant.create").filter(has_text="Org B")
    href = create_b.get_by_role("link").first.get_attribute("href")
    assert href and re.fullmatch(r"/audit/\d+/", href), href
    visit(page, problems, href, "audit-event", re.compile(r"^tenant\.create\s+Org B$"))
    expect(page.locator("main dl")).to_contain_text("root")
    expect(page.locator("main table")).to_contain_text('"b"')  # the after snapshot has the slug

    visit(page, problems, "/operations/", "operations", "Operations")
    expect(page.get_by_text("No operations yet.")).to_be_visible()

    # Swagger UI from the vendored sidecar: it must load its assets and the schema without the internet.
    problems.reset()
    response = page.goto("/api/v1/docs/")
    assert response is not None and response.status == 200
    expect(page.locator("#swagger-ui .information-container .title")).to_contain_text("GPU cluster operations console")
    for path in ("/api/v1/tenants/", "/api/v1/me/"):
        expect(scroll_to_operation(page, path)).to_be_visible()
    page.wait_for_load_state("load")
    screenshot(page, "api-docs")
    problems.assert_clean("/api/v1/docs/")

    visit(page, problems, "/admin/", "admin", "Site administration")
    expect(page.locator("#site-name")).to_have_text("GPU console administration")
    expect(page.locator("#content-main")).to_contain_text("Tenants")
