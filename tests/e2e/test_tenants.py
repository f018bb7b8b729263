"""Tenants in the browser: the tenant switcher, cross-tenant isolation, creating a team and refusing bad input."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from apps.accounts.models import Tenant
from apps.audit.models import AuditEvent
from tests.e2e.browser import PageProblems, log_in, screenshot

pytestmark = pytest.mark.e2e

SWITCHER_NOTE = "Showing tenant {} only (tenant switcher; choose"


def test_tenant_switcher_narrows_the_audit_log(page: Page, problems: PageProblems, personas_live):
    log_in(page, "root")
    page.goto("/audit/")
    expect(page.get_by_text("Showing tenant", exact=False)).to_have_count(0)
    expect(page.locator("main table tbody")).to_contain_text("Org A")

    switcher = page.get_by_test_id("tenant-switcher")
    expect(switcher.locator("option")).to_have_text(["All my tenants", "Org A", "Team A1", "Org B"])
    with page.expect_navigation():
        switcher.select_option(label="Org B")  # submits the form on change

    expect(page).to_have_url(re.compile(r"/audit/$"))  # back where the switch was made
    expect(switcher).to_have_value("b")
    expect(page.get_by_text(SWITCHER_NOTE.format("Org B"), exact=False)).to_be_visible()
    tenants = page.locator("main table tbody tr td:nth-child(5)")
    expect(tenants).to_have_text(["b", "b"])  # Org B's creation and member-b's grant, nothing of A
    expect(page.locator("main table tbody")).to_contain_text("member-b member on Org B")
    screenshot(page, "audit-switched-to-b")

    # The choice is kept in the session; lists that are not per tenant do not claim to be narrowed.
    page.goto("/tenants/")
    expect(switcher).to_have_value("b")
    expect(page.locator("main table tbody tr")).to_have_count(3)
    expect(page.get_by_text("Showing tenant", exact=False)).to_have_count(0)
    problems.assert_clean("the switched pages")


def test_member_of_b_gets_not_found_for_tenant_a(page: Page, personas_live):
    log_in(page, "member-b")
    response = page.goto("/tenants/a/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    expect(page.get_by_test_id("not-found")).to_be_visible()
    expect(page.get_by_text("Org A")).to_have_count(0)  # not even the name leaks
    expect(page.get_by_test_id("tenant-switcher").locator("option")).to_have_text(["All my tenants", "Org B"])
    screenshot(page, "not-found")

    # Their own tenant is there, and the way back from the error page works.
    page.get_by_role("link", name="Back to the overview").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Welcome, member-b")
    assert page.goto("/tenants/b/").status == 200
    expect(page.get_by_role("heading", level=1)).to_contain_text("Org B")


def test_tenant_admin_creates_a_team_and_bad_slug_is_refused(page: Page, problems: PageProblems, personas_live):
    log_in(page, "ta-a")
    page.goto("/tenants/a/")
    page.get_by_role("link", name="New child tenant").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("New tenant")
    parent = page.get_by_role("combobox", name="Parent")
    expect(parent.locator("option:checked")).to_have_text("Org A (a)")  # preselected from the link
    # A tenant admin may only create under what they manage, never a new organization.
    expect(parent.locator("option")).to_have_text(["(top-level organization)", "Org A (a)", "— Team A1 (a-team)"])

    page.get_by_role("textbox", name="Name").fill("Team A2")
    page.get_by_role("textbox", name="Slug").fill("a-team2")
    page.get_by_role("textbox", name="Description").fill("Vision training")
    page.get_by_role("textbox", name="Reason").fill("e2e: vision team starts")
    page.get_by_role("button", name="Save").click()

    expect(page).to_have_url(re.compile(r"/tenants/a-team2/$"))
    expect(page.get_by_role("alert").filter(has_text="Created tenant Team A2.")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"^Team A2\s+a-team2$"))
    breadcrumb = page.get_by_role("navigation", name="breadcrumb")
    expect(breadcrumb.get_by_role("link")).to_have_text(["Tenants", "Org A"])
    expect(page.locator("main p.text-body-secondary")).to_have_text("Vision training")
    screenshot(page, "tenant-created")
    created = Tenant.objects.get(slug="a-team2")
    assert created.parent_id == personas_live.a.pk
    assert created.path == f"{personas_live.a.path}{created.pk}/"
    event = AuditEvent.objects.get(action="tenant.create", target_id=str(created.pk))
    assert (event.actor_label, event.reason) == ("ta-a", "e2e: vision team starts")
    problems.assert_clean("tenant creation")

    # Bad input: the same form comes back with the error on the slug field, and nothing is created.
    tenants_before = Tenant.objects.count()
    events_before = AuditEvent.objects.count()
    page.goto("/tenants/new/")
    page.get_by_role("textbox", name="Name").fill("Bad")
    page.get_by_role("textbox", name="Slug").fill("Bad Slug!")
    page.get_by_role("combobox", name="Parent").select_option(label="Org A (a)")
    page.get_by_role("button", name="Save").click()

    expect(page).to_have_url(re.compile(r"/tenants/new/$"))
    slug = page.get_by_role("textbox", name="Slug")
    expect(slug).to_have_class(re.compile(r"\bis-invalid\b"))
    expect(slug).to_have_value("Bad Slug!")  # what was typed is kept to correct it
    error = page.locator(".invalid-feedback")
    expect(error).to_have_count(1)
    expect(error).to_be_visible()
    expect(page.locator(".mb-2", has=slug).locator(".invalid-feedback")).to_contain_text("DNS-1123 label")
    expect(page.get_by_role("textbox", name="Name")).not_to_have_class(re.compile(r"\bis-invalid\b"))
    screenshot(page, "tenant-bad-slug")
    assert Tenant.objects.count() == tenants_before
    assert not Tenant.objects.filter(name="Bad").exists()
    assert AuditEvent.objects.count() == events_before
    problems.assert_clean("the refused form")


def test_platform_admin_archives_a_team_and_brings_it_back(page: Page, problems: PageProblems, personas_live):
    """The archive button on a tenant's page: a confirmation naming what happens, then the badge; the team is
    gone from the list and the switcher; the same button unarchives it."""
    log_in(page, "root")
    page.goto("/tenants/a-team/")
    page.get_by_test_id("archive-tenant-open").click()
    dialog = page.get_by_test_id("archive-tenant")
    expect(dialog.get_by_test_id("confirm-impact")).to_contain_text("Team A1 is hidden from lists and pickers")
    dialog.get_by_role("textbox").fill("e2e: team disbanded")
    dialog.get_by_test_id("archive-tenant-confirm").click()

    expect(page).to_have_url(re.compile(r"/tenants/a-team/$"))
    expect(page.get_by_role("alert").filter(has_text="Archived Team A1.")).to_be_visible()
    expect(page.get_by_test_id("archived")).to_be_visible()
    screenshot(page, "tenant-archived")
    assert Tenant.objects.get(slug="a-team").archived_at is not None
    assert AuditEvent.objects.get(action="tenant.archive").reason == "e2e: team disbanded"
    expect(page.get_by_test_id("tenant-switcher").locator("option")).to_have_text(["All my tenants", "Org A", "Org B"])
    page.goto("/tenants/")
    expect(page.locator("main table tbody")).not_to_contain_text("Team A1")

    page.goto("/tenants/a-team/")
    page.get_by_test_id("unarchive-tenant-open").click()
    page.get_by_test_id("unarchive-tenant-confirm").click()
    expect(page.get_by_role("alert").filter(has_text="Unarchived Team A1.")).to_be_visible()
    expect(page.get_by_test_id("archived")).to_have_count(0)
    assert Tenant.objects.get(slug="a-team").archived_at is None
    problems.assert_clean("archiving and unarchiving")
