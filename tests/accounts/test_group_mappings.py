"""Roles from identity provider groups: the mappings, and the memberships each log-in makes of them."""

from __future__ import annotations

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
