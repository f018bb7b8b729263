"""Roles from identity provider groups: the mappings, and the memberships each log-in makes of them."""

from __future__ import annotations

import re

import pytest

from apps.accounts import services
from apps.accounts.group_mappings import roles_from_groups
from apps.accounts.models import GroupMapping, Membership, User
from apps.accounts.roles import Role
from apps.audit.models import AuditEvent
from apps.core.errors import Conflict, Forbidden, InvalidInput


@pytest.fixture
def mapped(personas):
    admin = personas.platform_admin
    services.create_group_mapping(admin, group="gpu-platform-admins", role=Role.PLATFORM_ADMIN)
    services.create_group_mapping(admin, group="gpu:{tenant}:{role}")
    services.create_group_mapping(admin, group="team-{tenant}", role=Role.VIEWER)
    return personas


@pytest.fixture
def person(db):
    return User.objects.create_user("sso-person", oidc_subject="sub-1")


def _roles(user) -> dict:
    return {(m.tenant.slug if m.tenant else None): (m.role, m.source) for m in user.memberships.all()}


def test_groups_give_the_strongest_mapped_role_per_place(mapped):
    a, b = mapped.a, mapped.b
    got = roles_from_groups(
        ["gpu-platform-admins", "gpu:a:member", "gpu:a:tenant-admin", "team-b", "gpu:nope:member", "other"]
    )
    assert {k: g.role for k, g in got.items()} == {None: "platform-admin", a.pk: "tenant-admin", b.pk: "viewer"}
    assert got[a.pk].group == "gpu:a:tenant-admin"


def test_a_role_that_does_not_fit_its_place_gives_nothing(mapped):
    # platform-admin is console-wide: a pattern cannot put it on a tenant.
    assert roles_from_groups(["gpu:a:platform-admin", "gpu:a:made-up"]) == {}


def test_a_login_grants_changes_and_removes_only_what_the_groups_say(mapped, person):
    services.grant_membership(mapped.platform_admin, user=person, tenant=mapped.b, role=Role.MEMBER)  # by hand
    before = AuditEvent.objects.count()

    services.sync_idp_memberships(person, ["gpu-platform-admins", "gpu:a:tenant-admin", "gpu:b:viewer"])
    assert _roles(person) == {
        None: ("platform-admin", "idp"),
        "a": ("tenant-admin", "idp"),
        "b": ("member", "manual"),  # hand-made: kept as it was
    }
    assert AuditEvent.objects.count() == before + 2

    services.sync_idp_memberships(person, ["gpu:a:member"])
    assert _roles(person) == {"a": ("member", "idp"), "b": ("member", "manual")}
    events = list(AuditEvent.objects.order_by("-id").values_list("action", "reason")[:2])
    assert sorted(action for action, _ in events) == ["membership.change", "membership.revoke"]
    assert all(reason.startswith("identity provider groups at log-in") for _, reason in events)

    count = AuditEvent.objects.count()
    services.sync_idp_memberships(person, ["gpu:a:member"])  # nothing changed: nothing written
    assert AuditEvent.objects.count() == count


def test_memberships_from_the_provider_cannot_be_edited_by_hand(mapped, person):
    services.sync_idp_memberships(person, ["gpu:a:member"])
    membership = Membership.objects.get(user=person)
    with pytest.raises(Conflict, match="identity provider"):
        services.change_membership_role(mapped.platform_admin, membership, role=Role.VIEWER)
    with pytest.raises(Conflict, match="identity provider"):
        services.revoke_membership(mapped.platform_admin, membership)
    assert Membership.objects.get(user=person).role == "member"


def test_only_platform_admins_map_groups(mapped):
    with pytest.raises(Forbidden):
        services.create_group_mapping(mapped.tenant_admin_a, group="x", tenant=mapped.a, role=Role.MEMBER)
    assert not GroupMapping.objects.filter(group="x").exists()


@pytest.mark.parametrize(
    ("group", "tenant", "role", "field"),
    [
        ("", None, "member", "group"),
        ("gpu:{team}", None, "member", "group"),
        ("gpu:{tenant}:{role}", None, "member", "role"),
        ("gpu:{tenant}", None, "platform-admin", "role"),
        ("exact", None, "member", "tenant"),  # a tenant role needs a tenant
        ("exact", "a", "platform-admin", "tenant"),  # a console-wide role names none
    ],
)
def test_bad_mappings_are_refused_naming_the_field(personas, group, tenant, role, field):
    tenant = personas.a if tenant else None
    with pytest.raises(InvalidInput) as refused:
        services.create_group_mapping(personas.platform_admin, group=group, tenant=tenant, role=role)
    assert field in refused.value.fields
    assert not GroupMapping.objects.exists()


def test_a_mapping_is_created_and_deleted_with_one_event_each(personas):
    mapping = services.create_group_mapping(personas.platform_admin, group="gpu-oncall", role=Role.ONCALL)
    services.delete_group_mapping(personas.platform_admin, mapping, reason="gone")
    actions = AuditEvent.objects.filter(target_type="accounts.groupmapping").values_list("action", flat=True)
    assert sorted(actions) == ["group_mapping.create", "group_mapping.delete"]


def test_the_page_maps_a_group_and_previews_what_groups_give(client, mapped):
    client.force_login(mapped.platform_admin)
    response = client.post("/accounts/group-mappings/", {"group": "ml-a", "tenant": "a", "role": "member"})
    assert response.status_code == 302
    assert GroupMapping.objects.get(group="ml-a").tenant == mapped.a

    page = client.get("/accounts/group-mappings/", {"groups": "gpu-platform-admins\ngpu:b:tenant-admin\nunknown"})
    preview = page.text.split('data-testid="preview"', 1)[1]
    assert "gpu:b:tenant-admin" in preview and "gpu-platform-admins" in preview
    assert "unknown" not in preview


def test_the_page_shows_a_refused_mapping_on_its_field(client, mapped):
    client.force_login(mapped.platform_admin)
    response = client.post("/accounts/group-mappings/", {"group": "gpu:{team}", "role": "member"})
    assert response.status_code == 400
    assert "Use {tenant} and {role} only." in response.text
    assert not GroupMapping.objects.filter(group="gpu:{team}").exists()


def test_the_page_is_for_platform_admins_only(client, mapped):
    client.force_login(mapped.tenant_admin_a)
    assert client.get("/accounts/group-mappings/").status_code == 403


def test_the_page_previews_what_a_persons_last_groups_would_give_today(client, mapped, person):
    """A log-in keeps the person's groups; the page shows, place by place, what a log-in today would do with them,
    with the same decisions sync_idp_memberships makes (the test then logs in the same groups and compares)."""
    services.grant_membership(mapped.platform_admin, user=person, tenant=mapped.b, role=Role.MEMBER)  # by hand
    groups = ["gpu:a:member", "team-a-team", "gpu:b:tenant-admin", "gpu-platform-admins"]
    services.record_sso_login(person, {"sub": "sub-1"}, groups)
    services.sync_idp_memberships(person, groups)
    person.refresh_from_db()
    assert person.idp_groups == sorted(groups)

    # Since then: the pattern for team-{tenant} is gone and a new mapping makes gpu:a:member a tenant-admin.
    GroupMapping.objects.filter(group="team-{tenant}").delete()
    services.create_group_mapping(mapped.platform_admin, group="gpu:a:member", tenant=mapped.a, role="tenant-admin")
    client.force_login(mapped.platform_admin)
    page = client.get("/accounts/group-mappings/", {"person": "sso-person"})
    assert page.status_code == 200
    assert "sso-person's 4 groups at their last log-in" in page.text
    table = page.text.split('data-testid="preview"', 1)[1].split("</table>", 1)[0]
    changes = dict(re.findall(r'data-change="([a-z-]+)">\s*<td>(?:<em>)?([^<]+)<', table))
    assert changes == {
        "same": "whole console",
        "change": "a",
        "hand-made": "b",
        "revoke": "a-team",
    }

    services.sync_idp_memberships(person, person.idp_groups)
    assert _roles(person) == {
        None: ("platform-admin", "idp"),
        "a": ("tenant-admin", "idp"),
        "b": ("member", "manual"),
    }


def test_the_preview_names_an_unknown_person(client, mapped):
    client.force_login(mapped.platform_admin)
    page = client.get("/accounts/group-mappings/", {"person": "nobody-here"}, follow=True)
    assert "No person is called nobody-here." in page.text
    assert 'data-testid="preview"' not in page.text


def _log_in_with_claims(settings, claims: dict):
    """The backend's account step with claims it verified (the ID token and the provider's flow are tested in
    test_sso.py and tests/e2e/test_sso.py): no UserInfo endpoint, so the ID token's claims are all there is."""
    from apps.accounts.sso.backend import OidcBackend

    settings.OIDC_USERNAME_CLAIM = "preferred_username"
    settings.OIDC_GROUPS_CLAIM = "groups"
    backend = OidcBackend()
    backend.OIDC_OP_USER_ENDPOINT = ""
    return backend.get_or_create_user(None, None, claims)


def test_a_groups_overage_refuses_the_log_in_instead_of_removing_every_role(settings, mapped, person):
    """Entra ID past 200 groups sends `_claim_names` (OpenID Connect Core 5.6.2 distributed claims) instead of the
    groups: taking that as no groups would revoke every role the groups gave."""
    from apps.accounts.sso.backend import SsoRefused

    services.sync_idp_memberships(person, ["gpu:a:member"])
    claims = {"sub": "sub-1", "preferred_username": "sso-person", "_claim_names": {"groups": "src1"}}
    with pytest.raises(SsoRefused, match="by reference"):
        _log_in_with_claims(settings, claims)
    assert _roles(person) == {"a": ("member", "idp")}
    # Absent altogether, it is no groups: the role goes.
    _log_in_with_claims(settings, {"sub": "sub-1", "preferred_username": "sso-person"})
    assert _roles(person) == {}


def test_only_platform_admins_allow_a_link_and_only_for_a_local_person(mapped, person):
    local = User.objects.create_user("local-person", password="pw-123-long-enough")
    with pytest.raises(Forbidden):
        services.allow_sso_link(mapped.tenant_admin_a, local)
    with pytest.raises(Conflict, match="linked to the identity provider already"):
        services.allow_sso_link(mapped.platform_admin, person)
    with pytest.raises(InvalidInput, match="federated trust"):
        services.allow_sso_link(mapped.platform_admin, mapped.ci_a)
    local.refresh_from_db()
    assert not local.oidc_link_pending
    assert not AuditEvent.objects.filter(action="user.allow_oidc_link").exists()


def test_without_an_allowed_link_a_local_account_of_that_name_is_refused(settings, mapped):
    from apps.accounts.sso.backend import SsoRefused

    User.objects.create_user("taken", password="pw-123-long-enough")
    with pytest.raises(SsoRefused, match="not linked"):
        _log_in_with_claims(settings, {"sub": "other-sub", "preferred_username": "taken"})
    assert User.objects.get(username="taken").oidc_subject == ""


def test_a_deactivated_persons_single_sign_on_session_ends(client, settings, mapped, person):
    """The session a provider log-in made belongs to OidcBackend: deactivating the account ends it too."""
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "apps.accounts.sso.backend.OidcBackend"]
    client.force_login(person, backend="apps.accounts.sso.backend.OidcBackend")
    assert client.get("/accounts/profile/").status_code == 200
    User.objects.filter(pk=person.pk).update(is_active=False)
    assert client.get("/accounts/profile/").status_code == 302  # to the log-in page
