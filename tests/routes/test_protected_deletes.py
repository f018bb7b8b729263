"""A delete that rows elsewhere still refer to is a 409 naming them, and changes nothing (issue 20: it was a 500).

The world's cluster has metered usage and credits; tenant A's organization has a closed period's statement, so
even with its teams, queues and people gone it could not be deleted (it can be archived instead).
"""

from __future__ import annotations

from apps.accounts.models import Tenant
from apps.audit.models import AuditEvent
from apps.fleet.models import Cluster
from tests.routes.matrix import api_client


def _refused(response, *names: str) -> dict:
    assert response.status_code == 409, response.content
    body = response.json()
    assert set(body) >= {"message", "code", "fields", "request_id"}
    assert body["code"] == "protected"
    for name in names:
        assert name in body["message"], body
    return body


def test_deleting_a_cluster_with_history_is_a_409_naming_what_refers_to_it(world, db):
    events = AuditEvent.objects.count()
    response = api_client(world, "platform_admin").delete(f"/api/v1/clusters/{world.cluster.name}/")
    body = _refused(response, world.cluster.name, "usage record")
    assert "usage record" in body["detail"]["blocked_by"]
    assert Cluster.objects.filter(pk=world.cluster.pk).exists()
    assert AuditEvent.objects.count() == events


def test_deleting_a_tenant_with_statements_is_a_409_naming_them(world, db):
    """Only the statements block: the service's own checks (children, service accounts) pass for this tenant."""
    tenant = world.foreign.tenant
    tenant.children.all().delete()
    tenant.service_accounts.all().delete()
    events = AuditEvent.objects.count()
    response = api_client(world, "platform_admin").delete(f"/api/v1/tenants/{tenant.slug}/")
    _refused(response, tenant.name, "statement")
    assert Tenant.objects.filter(pk=tenant.pk).exists()
    assert AuditEvent.objects.count() == events
