"""A GPU fault handled by the health app credits the tenant through chargeback, linked to the incident: health
records the run the fault cost, chargeback pulls the record and opens the credit (health imports nothing of
chargeback)."""

from fractions import Fraction

import pytest
from django.utils import timezone

from apps.backends.models import SimAllocation
from apps.backends.registry import get_backend
from apps.chargeback.credits import credit_lost_runs, settle_credits
from apps.chargeback.fractions import exact_seconds
from apps.chargeback.metering import meter_cluster
from apps.chargeback.models import Credit, CreditState, Period
from apps.health.models import Incident, LostRun
from apps.workloads.services import reconcile_workloads, submit_workload
from tests.health.conftest import cycle, inject, training_spec
from tests.utils.personas import fresh
from tests.utils.simulator import overruns, runs_to_the_end

pytestmark = pytest.mark.django_db


def test_a_job_killed_by_xid79_is_credited_with_its_incident(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    with django_capture_on_commit_callbacks(execute=True):
        workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=training_spec())
    reconcile_workloads()
    workload.refresh_from_db()
    runs_to_the_end(workload)
    killed_run = workload.backend_name
    get_backend(cluster).advance(1200)  # it has run 20 minutes when the GPU falls off the bus
    node, gpu = workload.placements[0]["node"], workload.placements[0]["gpus"][0]
    cycle(cluster)
    inject(cluster, node, "xid79", gpu)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    incident = Incident.objects.get(cause="xid-79")
    (lost,) = LostRun.objects.all()
    assert (lost.incident, lost.backend_id, lost.taken_at) == (incident, killed_run, None)
    assert not Credit.objects.exists()  # until chargeback pulls what health recorded
    assert credit_lost_runs() == 1 and credit_lost_runs() == 0  # each record is taken once
    credit = Credit.objects.get(backend_id=killed_run)
    assert credit.workload == workload and credit.tenant == personas.a and credit.state == CreditState.PENDING
    assert credit.incident_ref == f"#{incident.pk}" and credit.incident_url == f"/health/incidents/{incident.pk}/"
    assert credit.interrupted_at == lost.interrupted_at and credit.reason == lost.reason
    lost.refresh_from_db()
    assert lost.taken_at and lost.outcome == "1 credit(s) opened"
    meter_cluster(cluster.pk)
    assert settle_credits() == 1
    credit.refresh_from_db()
    run = SimAllocation.objects.get(workload__name=killed_run)
    assert Fraction(credit.gpu_seconds) == exact_seconds(run.ended_at - run.started_at) * 8
    assert credit.gpu_seconds >= 1200 * 8


def test_a_lost_run_chargeback_cannot_credit_is_taken_with_the_reason(fleet, personas):
    """The fault's handling does not wait for chargeback: a refusal (here, a closed period) is noted on the record,
    which is not pulled again."""
    from datetime import timedelta

    from apps.chargeback.models import PeriodState
    from apps.chargeback.periods import period_for

    cluster = fleet["cluster"]
    cycle(cluster)
    inject(cluster, fleet["nodes"][0].name, "xid79", 0)
    cycle(cluster)
    incident = Incident.objects.get(cause="xid-79")
    at = timezone.now() - timedelta(days=40)
    Period.objects.filter(pk=period_for(at).pk).update(state=PeriodState.CLOSED)
    lost = LostRun.objects.create(
        incident=incident, cluster=cluster, backend_id="wl1-gone", interrupted_at=at, reason="XID 79 (#1)"
    )
    assert credit_lost_runs() == 0
    lost.refresh_from_db()
    assert lost.taken_at and lost.outcome.startswith("no credit: Period ") and "is closed" in lost.outcome
    assert credit_lost_runs() == 0 and not Credit.objects.exists()


def _timed_out(fleet, personas, capture):
    """A training job whose work outlasted its max runtime: the simulator stopped it at the limit (issue 19)."""
    with capture(execute=True):
        workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=training_spec())
    reconcile_workloads()
    workload.refresh_from_db()
    overruns(workload)
    get_backend(fleet["cluster"]).advance(3600)
    reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "failed" and workload.state_reason.startswith("runtime limit reached"), workload
    return workload


def test_a_fault_after_a_run_hit_its_runtime_limit_requeues_nothing_and_credits_nobody(
    fleet, personas, django_capture_on_commit_callbacks
):
    cluster = fleet["cluster"]
    workload = _timed_out(fleet, personas, django_capture_on_commit_callbacks)
    node, gpu = workload.placements[0]["node"], workload.placements[0]["gpus"][0]
    cycle(cluster)
    inject(cluster, node, "xid79", gpu)  # on the GPU it held until its limit stopped it, moments ago
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    incident = Incident.objects.get(cause="xid-79")
    assert incident.state == "isolated"  # the automation cordoned the node and looked for the work it killed
    workload.refresh_from_db()
    assert (workload.state, workload.requeues) == ("failed", 0)
    assert not LostRun.objects.exists()
    assert credit_lost_runs() == 0 and not Credit.objects.exists()


def test_a_lost_run_recorded_after_its_runtime_limit_stopped_it_is_credited_to_nobody(
    fleet, personas, django_capture_on_commit_callbacks
):
    """Whoever records it: the limit ended that run, not the fault. Chargeback takes the record with the reason."""
    cluster = fleet["cluster"]
    workload = _timed_out(fleet, personas, django_capture_on_commit_callbacks)
    cycle(cluster)
    inject(cluster, workload.placements[0]["node"], "xid79", workload.placements[0]["gpus"][0])
    cycle(cluster)
    incident = Incident.objects.get(cause="xid-79")
    lost = LostRun.objects.create(
        incident=incident,
        cluster=cluster,
        backend_id=workload.backend_name,
        interrupted_at=get_backend(cluster).now(),
        reason="XID 79 (#1)",
    )
    assert credit_lost_runs() == 0 and not Credit.objects.exists()
    lost.refresh_from_db()
    assert lost.taken_at and lost.outcome == "no credit: its runtime limit (max_runtime_s) ended the run, not the fault"
