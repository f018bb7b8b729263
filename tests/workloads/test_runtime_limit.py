"""The runtime limit (issue 19): a run is stopped at its spec's max_runtime_s and ends `failed` with the reason
"runtime limit reached", never `succeeded`. On the simulator, work under a limit ends within it (a seeded share) or
overruns it and is stopped there; tests/backends/kubernetes/test_runtime_limit.py and the backend contract hold
Kubernetes and Slurm to the same."""

from datetime import timedelta

import pytest

from apps.audit.models import AuditEvent
from apps.backends.models import SimWorkload
from apps.backends.simulator.services import advance_time
from apps.workloads import services
from apps.workloads.services.requeue import FAULT, requeue_workload
from tests.utils.personas import fresh
from tests.utils.simulator import overruns
from tests.workloads.conftest import training_spec

pytestmark = pytest.mark.django_db


def running(personas, capture, **spec):
    with capture(execute=True):
        workload, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=training_spec(**spec))
    services.reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
    return workload


def test_a_simulated_run_never_succeeds_at_its_limit(fleet, personas, django_capture_on_commit_callbacks):
    """Before issue 19 the simulator ran every job exactly its max runtime and called that success."""
    workload = running(personas, django_capture_on_commit_callbacks, max_runtime_s=3600)
    advance_time(None, fleet["cluster"], 61)
    services.reconcile_workloads()
    workload.refresh_from_db()
    run = SimWorkload.objects.get(name=workload.backend_name)
    assert run.finished_at is not None and workload.state in {"succeeded", "failed"}
    if workload.state == "succeeded":  # its work ended before its limit
        assert run.finished_at - run.started_at < timedelta(seconds=3600), (run.started_at, run.finished_at)
    elif run.state == "timed-out":  # the seed made it overrun: stopped at the limit, a failure
        assert workload.state_reason.startswith("runtime limit reached (max_runtime_s 3600): ")


def test_a_run_that_overruns_its_limit_fails_with_the_runtime_limit_as_its_reason(
    fleet, personas, django_capture_on_commit_callbacks
):
    workload = running(personas, django_capture_on_commit_callbacks, max_runtime_s=1800)
    overruns(workload)
    advance_time(None, fleet["cluster"], 29)
    services.reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running"  # 29 of its 30 minutes
    advance_time(None, fleet["cluster"], 1)
    services.reconcile_workloads()
    workload.refresh_from_db()
    run = SimWorkload.objects.get(name=workload.backend_name)
    assert (run.state, run.finished_at - run.started_at) == ("timed-out", timedelta(seconds=1800))
    assert workload.state == "failed"
    assert workload.state_reason == "runtime limit reached (max_runtime_s 1800): stopped at its max runtime of 1800s"
    assert workload.stopped_by_runtime_limit
    event = workload.events.filter(kind="state").last()
    assert event.message.startswith("running → failed: runtime limit reached")
    # Its limit ended the run: a GPU fault found afterwards does not send it back to its queue.
    assert requeue_workload(fresh(personas.oncall), workload, cause=FAULT, reason="XID 79") is None
    assert not AuditEvent.objects.filter(action="workload.requeue").exists()


def test_a_run_counts_its_limit_from_its_latest_admission(fleet, personas, django_capture_on_commit_callbacks):
    """The console's own stop (reconcile.overdue_by) counts from the run's start, or from its latest admission when
    that is later (a preempted run keeps its first start and starts again once admitted)."""
    from django.utils import timezone

    from apps.workloads.services.reconcile import RUNTIME_GRACE, overdue_by

    workload = running(personas, django_capture_on_commit_callbacks, max_runtime_s=3600)
    now = timezone.now()
    workload.started_at = now - timedelta(hours=2)
    workload.admission.admitted_at = now - timedelta(hours=2)
    assert overdue_by(workload, now) == timedelta(hours=2)
    workload.admission.admitted_at = now - timedelta(minutes=10)
    assert overdue_by(workload, now) is None
    workload.admission.admitted_at = now - timedelta(seconds=3600) - RUNTIME_GRACE
    assert overdue_by(workload, now) == timedelta(seconds=3600) + RUNTIME_GRACE
    workload.spec = {**workload.spec, "max_runtime_s": None}
    assert overdue_by(workload, now) is None
