"""Issue 23: the overview reads each thing once. What it derives instead of querying again equals what the queries
gave: the tenant switcher, "Your roles", incidents by severity with the isolation budgets, the month's spend, the
heatmap from the utilization written at ingest; and a session's user comes with their memberships."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.accounts.context_processors import tenant_context
from apps.accounts.permissions import GRANTS_ATTR
from apps.dashboard import overview
from apps.dashboard.views import switchable, your_roles
from apps.fleet.models import Node
from apps.health.overview import incidents_and_isolation, isolation_budgets, open_incidents_by_severity
from tests.utils.personas import fresh

HOME = reverse("dashboard:home")


@pytest.mark.parametrize("persona", ["platform_admin", "member_a", "tenant_admin_a", "oncall", "member_b"])
def test_switcher_and_roles_equal_what_their_queries_gave(seeded, personas, persona):
    from apps.accounts.models import Tenant

    user = fresh(personas.user(persona))
    personas.b.archived_at = timezone.now()  # archived tenants are not offered
    Tenant.objects.filter(pk=personas.b.pk).update(archived_at=personas.b.archived_at)
    tenants = overview.overview_tenants()
    request = RequestFactory().get("/")
    request.user = user
    expected = [(t.pk, t.slug, t.name) for t in tenant_context(request)["switchable_tenants"]()]
    assert [(t.pk, t.slug, t.name) for t in switchable(fresh(user), tenants)] == expected
    memberships = [(m.role, m.tenant.slug if m.tenant else None) for m in user.memberships.select_related("tenant")]
    assert [(r.role, r.tenant.slug if r.tenant else None) for r in your_roles(fresh(user), tenants)] == memberships
    assert memberships  # every persona has a role


def test_incidents_and_isolation_equal_the_health_pages_reads(seeded, personas):
    from apps.health.models import Incident

    nodes = Node.objects.all()
    # One more isolated in the budget window on a node of a pool, and one long ago: only the first counts.
    node = Node.objects.filter(pool__isnull=False).first()
    now = timezone.now()
    for when in (now, now - timedelta(hours=3)):
        Incident.objects.create(
            node=node, cause=f"c-{when:%H}", rule_key="k", ruleset_version=1, title="t", severity="critical",
            action="cordon", state="isolated", detected_at=when, last_seen_at=when, auto_isolated_at=when,
        )  # fmt: skip
    severities, budgets = incidents_and_isolation(nodes)
    assert severities == open_incidents_by_severity(nodes)
    expected = sorted((str(b["pool"]), b["used"], b["limit"], b["nodes"]) for b in isolation_budgets(nodes))
    assert sorted((b["pool"], b["used"], b["limit"], b["nodes"]) for b in budgets) == expected
    assert any(used for _pool, used, _limit, _nodes in expected)


def test_the_default_isolation_policy_is_seeded_when_missing(seeded, personas):
    from apps.health.models import IsolationPolicy

    IsolationPolicy.objects.all().delete()
    _severities, budgets = incidents_and_isolation(Node.objects.all())
    assert budgets and IsolationPolicy.objects.filter(pool__isnull=True).count() == 1


def test_spend_without_a_period_row_is_empty_and_creates_none(db, personas):
    from apps.chargeback.models import Period

    Period.objects.all().delete()
    spend = overview.spend_this_month(None, overview.overview_tenants(), timezone.now())
    assert spend["empty"] and not any(row["cost"] for row in spend["rows"]) and not Period.objects.exists()


def test_the_heatmap_reads_the_utilization_ingest_writes(seeded, personas):
    from apps.health.ingest import gpu_utilization
    from apps.health.models import NodeHealth

    for health in NodeHealth.objects.all():
        assert health.gpu_util == (gpu_utilization(health.gpus) if health.exporter_up else {})
    before = overview.utilization_heatmap(Node.objects.all(), Node.objects.count())
    # The heatmap reads `gpu_util` only: the full readings may go, the picture stays.
    NodeHealth.objects.update(gpus={})
    assert overview.utilization_heatmap(Node.objects.all(), Node.objects.count()) == before
    NodeHealth.objects.update(gpu_util={})
    assert not overview.utilization_heatmap(Node.objects.all(), Node.objects.count())["has_data"]


def test_a_session_user_comes_with_their_memberships(seeded, personas, client):
    client.force_login(personas.member_a)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(HOME).status_code == 200
    sql = [q["sql"] for q in queries.captured_queries]
    assert not any(s.startswith("SELECT tenant_id, role FROM accounts_membership") for s in sql), sql
    assert any("accounts_membership m WHERE m.user_id = t0.id" in s for s in sql)


def test_a_deactivated_users_session_is_anonymous(seeded, personas, client):
    client.force_login(personas.member_a)
    type(personas.member_a).objects.filter(pk=personas.member_a.pk).update(is_active=False)
    response = client.get(HOME)
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_the_backend_keeps_the_grants_it_read(seeded, personas):
    from apps.accounts.backends import ModelBackend

    user = ModelBackend().get_user(personas.member_a.pk)
    assert getattr(user, GRANTS_ATTR) == [(personas.a.pk, "member")]
    assert ModelBackend().get_user(10**9) is None
