"""Audit sits below accounts: it scopes rows and filter choices through apps.core.tenant_scope, which
accounts fills in at start-up. Same answers as accounts' own, and no answer at all without accounts."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from apps.accounts.filtersets import visible_tenants
from apps.accounts.permissions import allowed_tenant_ids
from apps.audit.models import AuditEvent
from apps.core import tenant_scope
from tests.utils.personas import fresh


@pytest.mark.parametrize("persona", ["platform_admin", "tenant_admin_a", "member_a", "member_b", "oncall"])
def test_audit_scope_is_the_accounts_scope(personas, rf, persona):
    user = fresh(personas.user(persona))
    assert tenant_scope.allowed_tenant_ids(user, "view") == allowed_tenant_ids(user, "view")
    request = rf.get("/")
    request.user = user
    assert list(tenant_scope.visible_tenants(request)) == list(visible_tenants(request))
    assert not tenant_scope.visible_tenants(None).exists()


def test_tenant_filter_offers_only_visible_tenants(personas, api):
    client = api(fresh(personas.member_b))
    assert client.get("/api/v1/audit-events/?tenant=a").status_code == 400
    rows = client.get("/api/v1/audit-events/?tenant=b&page_size=1000").json()["results"]
    assert rows and {r["tenant"] for r in rows} == {"b"}


def test_an_unregistered_scope_fails_closed(personas, monkeypatch):
    monkeypatch.setattr(tenant_scope, "_allowed_tenant_ids", None)
    with pytest.raises(ImproperlyConfigured):
        list(AuditEvent.objects.for_user(fresh(personas.member_a), "view"))


def test_tenant_events_keep_their_target_type(personas, api):
    """The tenant model moved to accounts; its events are still named as before, old and new alike."""
    events = AuditEvent.objects.filter(action="tenant.create")
    assert set(events.values_list("target_type", flat=True)) == {"tenancy.tenant"}
    rows = api(fresh(personas.platform_admin)).get("/api/v1/audit-events/?target_type=tenancy.tenant").json()
    assert sorted(r["target_label"] for r in rows["results"]) == ["Org A", "Org B", "Team A1"]
