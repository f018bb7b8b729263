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
from tests.utils.simulator import runs_to_the_end

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
