"""A hung training job found by the minute's task on a real Celery worker (issue 24): the beat's fan-out, then the
per-cluster check on the health queue opens the job's incident."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.backends.models import SimWorkload
from apps.health.ingest import run_cycle
from apps.health.models import Incident
from apps.health.services import rulesets
from apps.health.services.rulesets import tune_rule
from apps.health.tasks import hung_jobs_task
from apps.tenancy.models import Admission
from apps.workloads.models import Workload
from apps.workloads.services import reconcile_workloads
from tests.utils.personas import build_personas, fresh
from tests.utils.waiting import wait_until
from tests.workloads.conftest import build_fleet, training_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_minute_task_opens_the_hung_jobs_incident(live_celery):
    from apps.workloads.services import submit_workload

    personas = build_personas()
    cluster = build_fleet(personas)["cluster"]
    params = {"window_minutes": 2, "util_below": 5, "traffic_below_mbps": 10, "then": "notify", "dump": False}
    tune_rule(fresh(personas.platform_admin), "hung-job", params=params, reason="integration")
    rulesets._compiled.clear()
    workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=training_spec(name="stuck"))
    assert wait_until(lambda: SimWorkload.objects.filter(name=workload.backend_name).exists(), timeout=20.0)
    SimWorkload.objects.filter(name=workload.backend_name).update(hang_after_s=0)  # quiet from the start

    def placed() -> bool:  # the worker may reconcile first, or the simulator place the run a moment later
        reconcile_workloads()
        workload.refresh_from_db()
        return workload.state == "running" and bool(workload.placements)

    assert wait_until(placed, timeout=20.0), (workload.state, workload.placements)
    now = timezone.now()
    # The run started (and was admitted) ten minutes ago, as far as the console knows.
    Workload.objects.filter(pk=workload.pk).update(started_at=now - timedelta(minutes=10))
    Admission.objects.filter(pk=workload.admission_id).update(admitted_at=now - timedelta(minutes=10))
    # Minutes of readings before the task runs (and one ahead: whichever minute the worker's check falls in, the
    # minutes of its window are rolled up).
    for back in (4, 3, 2, 1, 0, -1):
        run_cycle(cluster.pk, at=now - timedelta(minutes=back))
    assert not Incident.objects.filter(cause=f"hung-job-{workload.pk}").exists()
    hung_jobs_task.delay()
    assert wait_until(lambda: Incident.objects.filter(cause=f"hung-job-{workload.pk}").exists(), timeout=20.0)
    incident = Incident.objects.get(cause=f"hung-job-{workload.pk}")
    assert "a/stuck" in incident.title and list(incident.workloads.all()) == [workload]
