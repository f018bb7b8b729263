"""Requeue has one path, whatever ended the run: a preemption requeue leaves one timeline line and one audit
event, as a fault requeue does (tests/health/test_isolation.py)."""

import pytest
from django.db import transaction

from apps.audit.models import AuditEvent
from apps.backends.models import SimWorkload
from apps.core.errors import Forbidden
from apps.tenancy.services.admissions import run_admission_pass
from apps.workloads import reasons, services
from apps.workloads.models import OutboxAction, Workload
from apps.workloads.services.outbox import drain_outbox, enqueue, process_outbox_entry
from apps.workloads.services.reconcile import dispatch_admitted, reconcile_workloads
from apps.workloads.services.requeue import FAULT, requeue_workload
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec

pytestmark = pytest.mark.django_db


def running(personas, capture, **spec) -> Workload:
    with capture(execute=True):
        workload, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=training_spec(**spec))
    reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running"
    return workload


def preempt(workload: Workload, capture) -> Workload:
    """What carrying out a reclaim plan does (reconcile.carry_out_reclaims), then the outbox task runs."""
    with capture(execute=True), transaction.atomic():
        Workload.objects.filter(pk=workload.pk).update(state="cancelling", state_reason=reasons.PREEMPTED_FOR_LENDER)
        enqueue(workload, OutboxAction.PREEMPT)
    workload.refresh_from_db()
    return workload


def test_a_preemption_requeue_is_audited_once(fleet, personas, django_capture_on_commit_callbacks):
    workload = preempt(
        running(personas, django_capture_on_commit_callbacks, retries=2), django_capture_on_commit_callbacks
    )
    assert (workload.state, workload.requeues) == ("pending", 1)
    assert workload.backend_name == f"wl{workload.pk}r1-pretrain"
    assert workload.state_reason.startswith("requeued after preemption: ")
    assert [e.message for e in workload.events.filter(kind="requeue")] == ["requeued (1 of 2)"]
    (event,) = AuditEvent.objects.filter(action="workload.requeue")
    assert (event.actor_label, event.target_id, event.tenant_id) == ("system", str(workload.pk), personas.a.pk)
    assert event.reason == reasons.PREEMPTED_FOR_LENDER
    assert event.before == {"state": "preempted"}
    assert event.after == {"state": "pending", "requeues": 1, "backend_name": workload.backend_name}


def test_a_preempted_job_without_retries_left_stays_preempted_and_nothing_is_audited(
    fleet, personas, django_capture_on_commit_callbacks
):
    workload = preempt(
        running(personas, django_capture_on_commit_callbacks, retries=0), django_capture_on_commit_callbacks
    )
    assert (workload.state, workload.requeues) == ("preempted", 0)
    assert not workload.events.filter(kind="requeue").exists()
    assert not AuditEvent.objects.filter(action="workload.requeue").exists()


def test_a_fault_requeue_needs_on_call_and_is_audited_once(fleet, personas, django_capture_on_commit_callbacks):
    workload = running(personas, django_capture_on_commit_callbacks)
    with pytest.raises(Forbidden):
        requeue_workload(fresh(personas.member_a), workload, cause=FAULT, reason="XID 79")
    requeued = requeue_workload(fresh(personas.oncall), workload, cause=FAULT, reason="XID 79")
    assert (requeued.state, requeued.requeues, requeued.started_at, requeued.placements) == ("pending", 1, None, [])
    (event,) = AuditEvent.objects.filter(action="workload.requeue")
    assert (event.actor_label, event.reason, event.before) == (personas.oncall.username, "XID 79", {"state": "running"})
    assert requeue_workload(None, requeued, cause=FAULT, reason="again") is None  # pending: nothing to requeue
    assert AuditEvent.objects.filter(action="workload.requeue").count() == 1


def test_a_requeued_job_is_not_failed_by_a_reconcile_before_its_new_run_is_submitted(
    fleet, personas, django_capture_on_commit_callbacks
):
    """Issue 19: the tick admits and dispatches the requeued job, then reconciles while the worker has not yet
    taken the new run's submit entry. The first run's finished entry is no proof the new run reached the backend:
    the backend does not know the new name yet, and that is no reason to fail the job."""
    capture = django_capture_on_commit_callbacks
    workload = running(personas, capture)
    requeued = requeue_workload(fresh(personas.oncall), workload, cause=FAULT, reason="XID 79")
    assert requeued.backend_name == f"wl{workload.pk}r1-pretrain"
    run_admission_pass()
    assert dispatch_admitted() == 1
    assert reconcile_workloads() == 0  # the worker has not run the submit task yet: the tick's order in production
    workload.refresh_from_db()
    assert workload.state == "admitted", workload.state_reason
    assert not SimWorkload.objects.filter(name=workload.backend_name).exists()
    with capture(execute=True):
        assert drain_outbox() == 1  # the worker takes the new run's submit entry
    reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
    assert SimWorkload.objects.get(name=workload.backend_name).state == "running"
    assert list(workload.outbox.values_list("action", "run", "status")) == [
        ("submit", 0, "done"),
        ("submit", 1, "done"),
    ]


def test_an_earlier_runs_submit_still_queued_at_requeue_is_superseded(
    fleet, personas, django_capture_on_commit_callbacks
):
    """A fault requeues an admitted job whose first submit is still in the outbox (backing off): that entry must
    not start the new run under its new name while the job waits for admission again."""
    workload, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=training_spec())
    assert workload.state == "admitted"  # its submit entry has not run: no commit in this test
    (first,) = workload.outbox.all()
    requeued = requeue_workload(fresh(personas.oncall), workload, cause=FAULT, reason="XID 79")
    assert requeued.state == "pending"
    assert process_outbox_entry(first.pk) == "superseded"
    assert not SimWorkload.objects.filter(name=requeued.backend_name).exists()
    requeued.refresh_from_db()
    assert requeued.state == "pending"


def test_the_migration_numbers_the_runs_of_submit_entries_written_before_it(
    fleet, personas, django_capture_on_commit_callbacks
):
    """Entries from before the `run` column: a requeued workload's submit written after its latest requeue is its
    current run's, so reconcile keeps asking the backend about a job requeued before the upgrade."""
    from importlib import import_module

    from django.apps import apps

    migration = import_module("apps.workloads.migrations.0004_outbox_entry_run")
    capture = django_capture_on_commit_callbacks
    workload = running(personas, capture)
    requeue_workload(fresh(personas.oncall), workload, cause=FAULT, reason="XID 79")
    run_admission_pass()
    dispatch_admitted()
    with capture(execute=True):
        drain_outbox()
    workload.outbox.update(run=0)  # as the column's default left them
    migration.number_current_runs(apps, None)
    assert list(workload.outbox.values_list("run", flat=True)) == [0, 1]
    reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
