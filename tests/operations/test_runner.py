"""Persisted operations: enqueued on commit, claimed once, failures recorded with their reason."""

from datetime import timedelta
from unittest import mock

import pytest
from django.db import transaction
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.core.errors import Forbidden, InvalidInput
from apps.operations.models import Operation, OperationStatus
from apps.operations.runner import execute_operation
from apps.operations.services import prune_operations, start_operation
from tests.operations import handlers
from tests.utils.personas import fresh


@pytest.fixture(autouse=True)
def _reset_calls():
    handlers.CALLS.clear()


def test_start_enqueues_on_commit_and_runs(personas, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        op = start_operation(
            fresh(personas.member_a), "test.count", target=personas.a, tenant=personas.a, reason="nightly"
        )
    assert len(callbacks) == 1
    op.refresh_from_db()
    assert op.status == OperationStatus.SUCCEEDED and op.progress == 100 and op.result == {"steps": 2}
    assert "step 1" in op.log and "step 2" in op.log
    assert op.started_at and op.finished_at and op.attempts == 1
    assert [op.pk] == handlers.CALLS
    assert AuditEvent.objects.filter(action="operation.start", target_id=str(op.pk)).count() == 1


def test_rolled_back_transaction_never_enqueues(personas, django_capture_on_commit_callbacks):
    with mock.patch("apps.operations.tasks.run_operation_task.delay") as delay:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            with pytest.raises(RuntimeError), transaction.atomic():
                start_operation(fresh(personas.member_a), "test.count", tenant=personas.a)
                raise RuntimeError("the caller's change failed")
    assert callbacks == [] and not delay.called
    assert not Operation.objects.exists()
    assert not AuditEvent.objects.filter(action="operation.start").exists()


def test_duplicate_delivery_does_the_work_once(personas, django_capture_on_commit_callbacks):
    with mock.patch("apps.operations.tasks.run_operation_task.delay"):
        with django_capture_on_commit_callbacks(execute=True):
            op = start_operation(fresh(personas.member_a), "test.count", tenant=personas.a)
    assert execute_operation(op.pk) is True
    assert execute_operation(op.pk) is False  # the same message delivered again
    assert [op.pk] == handlers.CALLS
    op.refresh_from_db()
    assert op.attempts == 1 and op.status == OperationStatus.SUCCEEDED


def test_stale_running_operation_is_reclaimed(personas):
    op = Operation.objects.create(
        kind="test.count",
        status=OperationStatus.RUNNING,
        heartbeat_at=timezone.now() - timedelta(seconds=Operation.LEASE_SECONDS + 5),
    )
    assert execute_operation(op.pk) is True
    op.refresh_from_db()
    assert op.status == OperationStatus.SUCCEEDED and op.attempts == 1
    fresh_running = Operation.objects.create(
        kind="test.count", status=OperationStatus.RUNNING, heartbeat_at=timezone.now()
    )
    assert execute_operation(fresh_running.pk) is False


def test_deliberate_failure_is_recorded_without_traceback(personas):
    op = Operation.objects.create(kind="test.fail")
    execute_operation(op.pk)
    op.refresh_from_db()
    assert op.status == OperationStatus.FAILED
    assert op.error == "backend said no: node gpu-07 is not drainable"
    assert "Traceback" not in op.log and op.finished_at


def test_crash_is_recorded_with_traceback(personas):
    op = Operation.objects.create(kind="test.crash")
    execute_operation(op.pk)
    op.refresh_from_db()
    assert op.status == OperationStatus.FAILED
    assert op.error == "ZeroDivisionError: division by zero"
    assert "about to crash" in op.log and "Traceback" in op.log


def test_each_outcome_is_audited_once_by_who_started_it(personas, django_capture_on_commit_callbacks):
    """`operation.start` when asked, then one event for the outcome: what it did, or why it failed."""
    member = fresh(personas.member_a)
    with django_capture_on_commit_callbacks(execute=True):
        done = start_operation(member, "test.count", target=personas.a, tenant=personas.a, reason="nightly")
    events = list(AuditEvent.objects.filter(target_id=str(done.pk), target_type="operations.operation").order_by("id"))
    assert [e.action for e in events] == ["operation.start", "operation.succeeded"]
    outcome = events[1]
    assert (outcome.actor_id, outcome.tenant_id, outcome.reason) == (member.pk, personas.a.pk, "nightly")
    assert outcome.before == {"status": "running"}
    assert outcome.after == {
        "kind": "test.count",
        "target": str(personas.a),
        "status": "succeeded",
        "result": {"steps": 2},
    }
    assert execute_operation(done.pk) is False  # a duplicate delivery changes nothing and audits nothing
    assert AuditEvent.objects.filter(target_id=str(done.pk), action__startswith="operation.").count() == 2
    for kind, error in (
        ("test.fail", "backend said no: node gpu-07 is not drainable"),
        ("test.crash", "ZeroDivisionError: division by zero"),
    ):
        op = Operation.objects.create(kind=kind)
        execute_operation(op.pk)
        failed = AuditEvent.objects.get(target_id=str(op.pk), action="operation.failed")
        assert failed.actor is None and failed.actor_label == "system"
        assert failed.after == {"kind": kind, "target": "", "status": "failed", "error": error}


def test_unknown_kind(personas):
    op = Operation.objects.create(kind="no.such.kind")
    execute_operation(op.pk)
    op.refresh_from_db()
    assert op.status == OperationStatus.FAILED and "No handler" in op.error
    with pytest.raises(InvalidInput):
        start_operation(fresh(personas.platform_admin), "no.such.kind")


def test_start_checks_permission(personas):
    with pytest.raises(Forbidden):
        start_operation(fresh(personas.viewer_a), "test.count", tenant=personas.a)
    with pytest.raises(Forbidden):
        start_operation(fresh(personas.member_b), "test.count", tenant=personas.a)
    assert not Operation.objects.exists()


def test_operation_visibility(personas, api):
    op_a = Operation.objects.create(kind="test.count", tenant=personas.a)
    op_b = Operation.objects.create(kind="test.count", tenant=personas.b)
    ids = {r["id"] for r in api(fresh(personas.member_a)).get("/api/v1/operations/").json()["results"]}
    assert ids == {op_a.pk}
    assert api(fresh(personas.member_a)).get(f"/api/v1/operations/{op_b.pk}/").status_code == 404
    ids = {r["id"] for r in api(fresh(personas.oncall)).get("/api/v1/operations/").json()["results"]}
    assert ids == {op_a.pk, op_b.pk}


def test_prune_keeps_recent_and_unfinished(personas):
    old = timezone.now() - timedelta(days=100)
    Operation.objects.create(kind="test.count", status=OperationStatus.SUCCEEDED, finished_at=old)
    Operation.objects.create(kind="test.count", status=OperationStatus.RUNNING)
    Operation.objects.create(kind="test.count", status=OperationStatus.FAILED, finished_at=timezone.now())
    assert prune_operations(90) == 1
    assert Operation.objects.count() == 2
    assert AuditEvent.objects.filter(action="operation.prune").count() == 1
    assert prune_operations(90) == 0
    assert AuditEvent.objects.filter(action="operation.prune").count() == 1
