"""Fault credits on the simulator's drain path, idle waste, and spend budgets with alerts and the admission policy."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.backends.models import SimAllocation
from apps.backends.registry import get_backend
from apps.chargeback import services as chargeback
from apps.chargeback.budgets import budget_threshold_crossed, check_budgets, spend_of
from apps.chargeback.credits import settle_credits
from apps.chargeback.fractions import exact_seconds
from apps.chargeback.metering import meter_cluster
from apps.chargeback.models import BudgetAlert, Credit, CreditState, LineKind, SpendBudget, UsageRecord
from apps.chargeback.periods import month_start
from apps.chargeback.statements import compute_statements
from apps.core.errors import Conflict, Forbidden
from apps.tenancy.models import AdmissionHold, PriorityTier
from apps.tenancy.services.holds import check_hold
from tests.chargeback.conftest import advance, run, training_spec
from tests.chargeback.test_statements import ingest, usage
from tests.utils.personas import fresh


def test_a_drain_for_a_fault_credits_the_run_since_its_start(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    workload = run(personas.tenant_admin_a, django_capture_on_commit_callbacks, max_runtime_s=4 * 3600)
    advance(cluster, 1800)
    meter_cluster(cluster.pk)
    node = workload.placements[0]["node"]
    result = get_backend(cluster).drain(node, "XID 79: GPU fell off the bus")
    assert workload.backend_name in result.evicted
    meter_cluster(cluster.pk)  # the evicted job may restart elsewhere at once: its new run is metered too
    with pytest.raises(Forbidden):
        chargeback.credit_drain(fresh(personas.tenant_admin_a), cluster, result, reason="XID 79")
    (credit,) = chargeback.credit_drain(
        fresh(personas.oncall),
        cluster,
        result,
        reason="XID 79 on " + node,
        incident_ref="INC-42",
        incident_url="/health/incidents/42/",
    )
    assert credit.state == CreditState.PENDING and settle_credits() == 0  # not metered past the fault yet
    advance(cluster, 600)
    meter_cluster(cluster.pk)
    assert settle_credits() == 1
    credit.refresh_from_db()
    first_run = SimAllocation.objects.filter(workload__name=workload.backend_name).order_by("started_at").first()
    lost = exact_seconds(first_run.ended_at - first_run.started_at) * 8
    assert Fraction(credit.gpu_seconds) == lost and credit.gpus == 8
    assert credit.run_started_at == first_run.started_at
    # Settling again, or crediting the same interruption again, adds nothing.
    assert settle_credits() == 0
    assert (
        chargeback.credit_drain(fresh(personas.oncall), cluster, result, reason="again", at=credit.interrupted_at) == []
    )
    (statement,) = [s for s in compute_statements(credit.period) if s.tenant == personas.a_team]
    (line,) = [x for x in statement.computed_lines if x.kind == LineKind.CREDIT]
    assert line.incident_ref == "INC-42" and line.incident_url == "/health/incidents/42/"
    assert line.amount == -(Decimal(credit.gpu_seconds) * Decimal("2.5") / 3600).quantize(Decimal("0.01"))
    assert statement.total == statement.usage_amount - statement.credit_amount
    assert AuditEvent.objects.filter(action="chargeback.credit.create").count() == 1


def test_idle_time_of_a_tiny_vgpu_is_waste(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    # A 4 % HAMi slice alone on its GPU keeps it under 5 % utilization; a whole GPU is busy.
    idle = run(
        personas.tenant_admin_a,
        django_capture_on_commit_callbacks,
        name="notebook",
        workers=1,
        gpus_per_worker=1,
        sharing={"mode": "hami", "gpumem_mib": 1024, "gpucores": 4},
    )
    busy = run(personas.tenant_admin_a, django_capture_on_commit_callbacks, name="busy", gpus_per_worker=1)
    advance(cluster, 1200)
    meter_cluster(cluster.pk)
    idle_rows = list(UsageRecord.objects.filter(workload=idle))
    busy_rows = list(UsageRecord.objects.filter(workload=busy))
    assert idle_rows and busy_rows
    assert sum(r.idle_gpu_seconds for r in idle_rows) == sum(r.gpu_seconds for r in idle_rows)
    assert sum(r.idle_gpu_seconds for r in busy_rows) == 0
    assert all(r.used_gpu_seconds > r.gpu_seconds * Decimal("0.8") for r in busy_rows)


def test_budget_alerts_fire_once_and_stop_preemptible_admission(
    fleet, personas, api, django_capture_on_commit_callbacks
):
    admin, cluster = fleet["admin"], fleet["cluster"]
    with pytest.raises(Forbidden):  # an organization's budget is the platform admins'
        chargeback.set_spend_budget(fresh(personas.tenant_admin_a), tenant=personas.a, monthly_amount="10")
    chargeback.set_spend_budget(fresh(personas.tenant_admin_a), tenant=personas.a_team, monthly_amount="1000")
    chargeback.set_spend_budget(admin, tenant=personas.a, monthly_amount="10.00", block_preemptible_when_over=True)
    received = []
    budget_threshold_crossed.connect(lambda **kw: received.append(kw["threshold"]), weak=False)
    ingest(cluster, [usage("a-team", "train", "h100", 8, month_start(timezone.now()), 1)])  # 8 GPU-h × 2.50 = 20.00
    with django_capture_on_commit_callbacks(execute=True):
        assert check_budgets() == 3
    assert check_budgets() == 0  # each threshold once per period
    assert sorted(received) == [50, 80, 100]
    assert sorted(BudgetAlert.objects.filter(budget__tenant=personas.a).values_list("threshold", flat=True)) == [
        50,
        80,
        100,
    ]
    assert AuditEvent.objects.filter(action="chargeback.budget.alert").count() == 3
    spend = spend_of(personas.a)
    assert spend.cost_to_date == Decimal("20.00") and spend.forecast >= spend.cost_to_date and spend.used_pct == 200
    response = api(fresh(personas.tenant_admin_a)).post(
        "/api/v1/workloads/", {"kind": "training", "spec": training_spec(name="more")}, format="json"
    )
    assert response.status_code == 409 and response.json()["code"] == "over_budget"
    assert "over its monthly spend budget" in response.json()["message"]
    check_hold(personas.a_team, PriorityTier.objects.get(name="online-inference"))  # serving still admitted
    with pytest.raises(Conflict):
        check_hold(personas.a_team, PriorityTier.objects.get(name="exploratory"))
    chargeback.set_spend_budget(admin, tenant=personas.a, monthly_amount="100.00", block_preemptible_when_over=True)
    check_budgets()
    check_hold(personas.a_team, PriorityTier.objects.get(name="training"))  # under budget again
    assert not Credit.objects.exists()


def test_the_budget_pause_is_an_admission_hold_that_follows_the_budget(fleet, personas):
    """Chargeback keeps tenancy's hold in step with the budget: spent and blocking, the tenant is held; the
    policy dropped or the budget no longer spent, the hold goes, at once for a change of policy."""
    admin, training = fleet["admin"], PriorityTier.objects.get(name="training")
    chargeback.set_spend_budget(admin, tenant=personas.a, monthly_amount="10.00", block_preemptible_when_over=True)
    assert not AdmissionHold.objects.exists()  # not spent yet
    ingest(fleet["cluster"], [usage("a-team", "train", "h100", 8, month_start(timezone.now()), 1)])  # 20.00
    check_budgets()
    hold = AdmissionHold.objects.get(tenant=personas.a)
    assert (hold.amount, hold.since) == (Decimal("10.00"), SpendBudget.objects.get(tenant=personas.a).over_since)
    with pytest.raises(Conflict):
        check_hold(personas.a_team, training)  # a team is held by its organization's hold
    chargeback.set_spend_budget(admin, tenant=personas.a, monthly_amount="10.00", block_preemptible_when_over=False)
    assert not AdmissionHold.objects.exists()
    check_hold(personas.a_team, training)
    chargeback.set_spend_budget(admin, tenant=personas.a, monthly_amount="15.00", block_preemptible_when_over=True)
    assert AdmissionHold.objects.get(tenant=personas.a).amount == Decimal("15.00")  # still spent: held again
    chargeback.set_spend_budget(admin, tenant=personas.a, monthly_amount="100.00", block_preemptible_when_over=True)
    check_budgets()
    assert not AdmissionHold.objects.exists()


def test_cost_to_date_and_budget_reach_the_console_metrics(fleet, personas, client):
    from prometheus_client.parser import text_string_to_metric_families

    chargeback.set_spend_budget(fleet["admin"], tenant=personas.a, monthly_amount="10.00")
    ingest(fleet["cluster"], [usage("a-team", "train", "h100", 8, month_start(timezone.now()), 1)])  # 20.00
    text = client.get("/metrics").content.decode()
    got = {
        (s.name, s.labels["tenant"]): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name in {"gpuc_cost_to_date", "gpuc_spend_budget"}
    }
    assert got[("gpuc_cost_to_date", "a-team")] == 20.0 and got[("gpuc_cost_to_date", "a")] == 20.0  # rolled up
    assert got[("gpuc_spend_budget", "a")] == 10.0 and ("gpuc_cost_to_date", "b") not in got


def test_budget_thresholds_reach_the_tenants_channels_once(fleet, personas, django_capture_on_commit_callbacks):
    from django.core import mail

    from apps.notifications.models import NotificationChannel

    NotificationChannel.objects.create(tenant=personas.a, kind="email", target="finance-a@example.com")
    NotificationChannel.objects.create(tenant=personas.b, kind="email", target="b@example.com")  # not theirs
    NotificationChannel.objects.create(kind="email", target="oncall@example.com")  # budgets are not on-call's
    chargeback.set_spend_budget(fleet["admin"], tenant=personas.a, monthly_amount="25.00")
    ingest(fleet["cluster"], [usage("a-team", "train", "h100", 8, month_start(timezone.now()), 1)])  # 20.00: 80 %
    with django_capture_on_commit_callbacks(execute=True):
        assert check_budgets() == 2
    with django_capture_on_commit_callbacks(execute=True):
        assert check_budgets() == 0
    assert [m.to for m in mail.outbox] == [["finance-a@example.com"], ["finance-a@example.com"]]
    assert sorted(m.subject for m in mail.outbox) == [
        f"a: {t} % of the {month_start(timezone.now()):%Y-%m} GPU budget spent" for t in (50, 80)
    ]
    assert "20.00 USD of its monthly budget of 25.00 USD (80.0 %)" in mail.outbox[-1].body
