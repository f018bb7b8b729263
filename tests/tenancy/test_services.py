"""Tenant tree services: paths stay consistent through moves; organizations are platform business."""

import pytest

from apps.accounts.models import Tenant
from apps.core.errors import Forbidden, InvalidInput
from apps.tenancy.services import create_tenant, delete_tenant, update_tenant
from tests.utils.personas import fresh


def _tree_is_consistent():
    for tenant in Tenant.objects.select_related("parent"):
        expected = f"{tenant.parent.path if tenant.parent else '/'}{tenant.pk}/"
        assert tenant.path == expected, (tenant.slug, tenant.path, expected)


def test_paths_follow_moves_at_any_depth(personas):
    admin = fresh(personas.platform_admin)
    level = personas.a_team
    for depth in range(2, 6):
        level = create_tenant(admin, name=f"L{depth}", slug=f"l{depth}", parent=level)
    assert level.depth == 5
    update_tenant(admin, Tenant.objects.get(slug="a-team"), parent=personas.b)
    _tree_is_consistent()
    assert Tenant.objects.get(slug="l5").ancestor_ids()[:2] == [personas.b.pk, personas.a_team.pk]
    assert set(Tenant.objects.subtree_of(personas.b).values_list("slug", flat=True)) == {
        "b",
        "a-team",
        "l2",
        "l3",
        "l4",
        "l5",
    }


def test_promote_team_to_organization_needs_platform_admin(personas):
    with pytest.raises(Forbidden):
        update_tenant(fresh(personas.tenant_admin_a), Tenant.objects.get(slug="a-team"), parent=None)
    update_tenant(fresh(personas.platform_admin), Tenant.objects.get(slug="a-team"), parent=None)
    _tree_is_consistent()


def test_unknown_fields_and_bad_values_change_nothing(personas):
    admin = fresh(personas.platform_admin)
    with pytest.raises(InvalidInput):
        update_tenant(admin, Tenant.objects.get(slug="a"), colour="red")
    with pytest.raises(InvalidInput) as exc:
        update_tenant(admin, Tenant.objects.get(slug="a"), slug="UPPER")
    assert "DNS-1123" in exc.value.fields["slug"][0]
    assert Tenant.objects.get(pk=personas.a.pk).slug == "a"


def test_delete_empty_tenant(personas):
    admin = fresh(personas.platform_admin)
    leaf = create_tenant(admin, name="Leaf", slug="leaf", parent=personas.b)
    delete_tenant(admin, leaf, reason="typo")
    assert not Tenant.objects.filter(slug="leaf").exists()
    with pytest.raises(Forbidden):
        delete_tenant(fresh(personas.tenant_admin_a), Tenant.objects.get(slug="a-team"))
