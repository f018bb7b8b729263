"""The permission policy, persona by persona: one table, checked exhaustively."""

import pytest

from apps.accounts.authentication import BearerTokenAuthentication
from apps.accounts.models import Tenant
from apps.accounts.permissions import allowed_tenant_ids, has_perm
from apps.accounts.roles import Action
from tests.utils.personas import fresh

V, S, M, O, A = Action.VIEW, Action.SUBMIT, Action.MANAGE, Action.OPERATE, Action.ADMINISTER  # noqa: E741 (short names keep the table readable)

# persona -> {where: allowed actions}; "console" is the console-wide (no tenant) check.
EXPECTED = {
    "platform_admin": {
        "a": {V, S, M, O, A},
        "a_team": {V, S, M, O, A},
        "b": {V, S, M, O, A},
        "console": {V, S, M, O, A},
    },
    "tenant_admin_a": {"a": {V, S, M}, "a_team": {V, S, M}, "b": set(), "console": set()},
    "member_a": {"a": {V, S}, "a_team": set(), "b": set(), "console": set()},
    "member_b": {"a": set(), "a_team": set(), "b": {V, S}, "console": set()},
    "oncall": {"a": {V, O}, "a_team": {V, O}, "b": {V, O}, "console": {V, O}},
    "viewer_a": {"a": {V}, "a_team": set(), "b": set(), "console": set()},
    "ci_a": {"a": {V, S}, "a_team": set(), "b": set(), "console": set()},
}


@pytest.mark.parametrize("persona", sorted(EXPECTED))
def test_role_matrix(personas, persona):
    user = fresh(personas.user(persona))
    for where, allowed in EXPECTED[persona].items():
        tenant = None if where == "console" else getattr(personas, where)
        for action in Action.values:
            assert has_perm(user, action, tenant) == (action in allowed), (persona, where, action)


def test_allowed_tenant_ids(personas):
    assert allowed_tenant_ids(fresh(personas.platform_admin), V) is None
    assert allowed_tenant_ids(fresh(personas.oncall), V) is None
    assert allowed_tenant_ids(fresh(personas.oncall), M) == set()
    assert allowed_tenant_ids(fresh(personas.tenant_admin_a), M) == {personas.a.pk, personas.a_team.pk}
    assert allowed_tenant_ids(fresh(personas.member_a), S) == {personas.a.pk}
    assert allowed_tenant_ids(fresh(personas.member_b), V) == {personas.b.pk}


def test_subtree_grant_covers_tenants_created_later(personas):
    from apps.tenancy.services import create_tenant

    deep = create_tenant(fresh(personas.tenant_admin_a), name="Deep", slug="deep", parent=personas.a_team)
    assert has_perm(fresh(personas.tenant_admin_a), M, deep)
    assert not has_perm(fresh(personas.member_a), V, deep)


def test_inactive_and_anonymous_have_nothing(personas):
    from django.contrib.auth.models import AnonymousUser

    user = fresh(personas.member_a)
    user.is_active = False
    assert not has_perm(user, V, personas.a)
    assert not has_perm(AnonymousUser(), V, personas.a)


def _as_token(personas, raw):
    from rest_framework.test import APIRequestFactory

    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    user, _ = BearerTokenAuthentication().authenticate(request)
    return user


def test_token_is_narrowed_to_its_scope(personas):
    """A viewer token of a tenant admin may only view, and only where its user may."""
    from apps.accounts.services import issue_token

    admin = fresh(personas.tenant_admin_a)
    _, raw = issue_token(admin, user=admin, name="read", tenant=personas.a, role="viewer")
    user = _as_token(personas, raw)
    assert has_perm(user, V, personas.a)
    assert not has_perm(user, S, personas.a)
    assert not has_perm(user, M, personas.a)
    assert not has_perm(user, V, personas.b)


def test_tenant_admin_token_covers_the_subtree(personas):
    from apps.accounts.services import issue_token

    admin = fresh(personas.tenant_admin_a)
    _, raw = issue_token(admin, user=admin, name="adm", tenant=personas.a, role="tenant-admin")
    user = _as_token(personas, raw)
    assert has_perm(user, M, personas.a_team)
    assert not has_perm(user, V, personas.b)


def test_token_loses_rights_when_membership_is_revoked(personas):
    from apps.accounts.models import Membership
    from apps.accounts.services import revoke_membership

    assert has_perm(_as_token(personas, personas.token_a_raw), S, personas.a)
    membership = Membership.objects.get(user=personas.ci_a, tenant=personas.a)
    revoke_membership(fresh(personas.tenant_admin_a), membership)
    assert not has_perm(_as_token(personas, personas.token_a_raw), V, personas.a)


def test_platform_admin_console_wide_token_for_a_tenant_admin_cannot_exceed_user(personas):
    """A console-wide viewer token of a tenant admin sees only the admin's own tenants."""
    from apps.accounts.services import issue_token
    from apps.core.errors import Forbidden

    admin = fresh(personas.tenant_admin_a)
    with pytest.raises(Forbidden):
        issue_token(admin, user=admin, name="wide", tenant=None, role="viewer")
    assert Tenant.objects.for_user(admin, V).count() == 2
