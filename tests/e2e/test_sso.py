"""Single sign-on in Chromium against the real OpenID provider (tests/oidc): log in on the provider's page, land on
the overview, log out of both."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from apps.accounts import services
from apps.accounts.models import User
from apps.accounts.roles import Role
from apps.audit.models import AuditEvent
from tests.e2e.browser import PageProblems, screenshot
from tests.oidc_provider import PASSWORDS, use_provider

pytestmark = pytest.mark.e2e


@pytest.fixture
def sso(settings, oidc_provider, transactional_db):
    use_provider(settings, oidc_provider)
    settings.OIDC_BUTTON_LABEL = "Log in with Test IdP"
    return oidc_provider


def _sign_in_at_provider(page: Page, sso, username: str, password: str) -> None:
    expect(page).to_have_url(re.compile("^" + re.escape(sso.issuer) + "/interaction/"))
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


@pytest.fixture
def alice_groups(sso):
    """alice's groups at the provider for this test, put back afterwards (the provider lives for the session)."""
    sso.set_groups("alice", ["gpu-platform-admins", "gpu:a:tenant-admin"])
    yield
    sso.set_groups("alice", ["gpu-platform-admins", "gpu:research:tenant-admin"])


def _user_events(user) -> list[str]:
    events = AuditEvent.objects.filter(target_type="accounts.user", target_id=str(user.pk)).order_by("id")
    return list(events.values_list("action", flat=True))


def _roles(username: str) -> set:
    user = User.objects.get(username=username)
    return {(m.tenant.slug if m.tenant else None, m.role, m.source) for m in user.memberships.all()}


def test_a_person_logs_in_through_the_provider_and_out_of_both(
    page: Page, problems: PageProblems, sso, live_server, personas_live, alice_groups
):
    services.create_group_mapping(personas_live.platform_admin, group="gpu-platform-admins", role=Role.PLATFORM_ADMIN)
    services.create_group_mapping(personas_live.platform_admin, group="gpu:{tenant}:{role}")
    page.goto("/accounts/login/")
    screenshot(page, "sso-login")
    page.get_by_role("link", name="Log in with Test IdP").click()
    _sign_in_at_provider(page, sso, "alice", "wrong")
    expect(page.get_by_role("alert")).to_have_text("Wrong user name or password.")
    _sign_in_at_provider(page, sso, "alice", PASSWORDS["alice"])

    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Welcome, alice")
    page.wait_for_load_state("load")
    alice = User.objects.get(username="alice")
    assert (alice.oidc_subject, alice.email, alice.first_name, alice.last_name) == (
        "alice",
        "alice@example.test",
        "Alice",
        "Adams",
    )
    assert not alice.has_usable_password()
    assert _user_events(alice) == [
        "user.create",
        "user.login_oidc",
    ]
    # Exactly the mapped roles: platform admin from one group, tenant admin of A from the pattern.
    assert _roles("alice") == {(None, "platform-admin", "idp"), ("a", "tenant-admin", "idp")}
    page.goto("/accounts/profile/")
    expect(page.get_by_test_id("membership-source")).to_have_text(["identity provider groups"] * 2)
    screenshot(page, "sso-profile")

    # The mappings page previews what alice's groups from this log-in would give today, place by place.
    page.goto("/accounts/group-mappings/")
    page.get_by_label("A person: their groups from their last log-in").fill("alice")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_test_id("preview-person")).to_contain_text("alice's 2 groups at their last log-in")
    expect(page.get_by_test_id("preview").locator("tbody tr")).to_have_count(2)
    expect(page.get_by_test_id("preview")).to_contain_text("gpu:a:tenant-admin")
    screenshot(page, "sso-group-preview")

    # The IdP's admin takes alice out of the platform admins' group and makes her a member of A.
    sso.set_groups("alice", ["gpu:a:member"])

    # Log out: the console's session ends, then the provider's (RP-initiated logout), then back to the log-in page.
    page.get_by_role("button", name="alice").click()
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile("^" + re.escape(sso.issuer) + "/session/end"))
    page.get_by_role("button", name="Yes, sign me out").click()
    expect(page).to_have_url(re.compile(re.escape(live_server.url) + "/accounts/login/"))

    # The provider's session is over: logging in again asks for the password again.
    page.get_by_role("link", name="Log in with Test IdP").click()
    _sign_in_at_provider(page, sso, "alice", PASSWORDS["alice"])
    expect(page.get_by_role("heading", level=1)).to_have_text("Welcome, alice")
    page.wait_for_load_state("load")
    assert sorted(_user_events(alice)) == ["user.create", "user.login_oidc", "user.login_oidc", "user.logout"]
    # At this log-in the removed group's role went, the changed one changed.
    assert _roles("alice") == {("a", "member", "idp")}
    problems.assert_clean("single sign-on")


def test_a_local_account_of_the_same_name_is_not_taken_over(page: Page, sso, live_server):
    User.objects.create_user("bob", password="local-secret-password")
    page.goto("/accounts/login/")
    page.get_by_role("link", name="Log in with Test IdP").click()
    _sign_in_at_provider(page, sso, "bob", PASSWORDS["bob"])
    expect(page).to_have_url(re.compile(re.escape(live_server.url) + "/accounts/login/"))
    expect(page.get_by_role("alert").first).to_contain_text("a console account named bob exists")
    assert User.objects.get(username="bob").oidc_subject == ""
    assert not AuditEvent.objects.filter(action="user.login_oidc").exists()


def test_a_local_account_a_platform_admin_allowed_is_linked_at_its_next_log_in(
    page: Page, sso, live_server, personas_live, api
):
    """Moving a team to single sign-on: bob's local account keeps its memberships and becomes his IdP identity."""
    bob = User.objects.create_user("bob", password="local-secret-password")
    services.grant_membership(personas_live.platform_admin, user=bob, tenant=personas_live.a, role=Role.MEMBER)
    refused = api(personas_live.tenant_admin_a).post(
        "/api/v1/users/bob/allow-sso-link/", {"reason": "x"}, format="json"
    )
    assert refused.status_code in (403, 404)
    answer = api(personas_live.platform_admin).post(
        "/api/v1/users/bob/allow-sso-link/", {"reason": "moving to SSO"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["sso"] == "pending"

    page.goto("/accounts/login/")
    page.get_by_role("link", name="Log in with Test IdP").click()
    _sign_in_at_provider(page, sso, "bob", PASSWORDS["bob"])
    expect(page.get_by_role("heading", level=1)).to_have_text("Welcome, bob")
    page.wait_for_load_state("load")
    bob.refresh_from_db()
    assert (bob.oidc_subject, bob.oidc_link_pending, bob.has_usable_password()) == ("bob", False, False)
    assert ("a", "member", "manual") in _roles("bob")  # the hand-made membership stays
    assert _user_events(bob)[-3:] == ["user.allow_oidc_link", "user.link_oidc", "user.login_oidc"]
    assert api(personas_live.platform_admin).get("/api/v1/users/bob/").json()["sso"] == "linked"
