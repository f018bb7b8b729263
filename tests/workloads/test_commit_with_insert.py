"""Issue 23: a submission's rows and its COMMIT go to PostgreSQL in one round trip (`insert_rows_and_commit`, and
`insert_rows_if_locked` outside a transaction).

Committed rows only (transaction=True): the submission's transaction is the outermost one, as in a request."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from psycopg.pq import Trace, TransactionStatus

from apps.audit.models import AuditEvent
from apps.core.inserts import Guard, insert_rows_and_commit, insert_rows_if_locked
from apps.tenancy.models import Admission
from apps.workloads import services
from apps.workloads.models import OutboxEntry, Workload, WorkloadEvent
from apps.workloads.services import outbox
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_submission_commits_its_rows_with_the_insert_and_wakes_the_outbox_after(fleet, personas, monkeypatch):
    woken = []

    def wake(task, raised):  # an on-commit hook: runs after the commit, outside the pipeline
        woken.append((connection.in_atomic_block, connection.connection.pgconn.transaction_status, raised))

    monkeypatch.setattr(outbox, "wake_if_raised", wake)
    workload, created = services.submit_workload(
        fresh(personas.member_a), kind="training", spec=training_spec(), idempotency_key="one-trip"
    )
    assert created and workload.pk and workload.admission.pk and not workload._state.adding
    assert woken == [(False, TransactionStatus.IDLE, True)]  # the statement raised the drain's flag: queue it
    assert connection.get_autocommit() and not connection.in_atomic_block
    stored = Workload.objects.get(pk=workload.pk)
    assert stored.admission_id == workload.admission.pk and stored.backend_name == workload.backend_name
    assert Admission.objects.filter(pk=workload.admission.pk, state="admitted").exists()
    assert OutboxEntry.objects.filter(workload=stored).count() == 1
    assert WorkloadEvent.objects.filter(workload=stored, kind="submitted").count() == 1
    assert AuditEvent.objects.filter(action="workload.submit", target_id=str(stored.pk)).count() == 1
    again, created = services.submit_workload(
        fresh(personas.member_a), kind="training", spec=training_spec(), idempotency_key="one-trip"
    )
    assert not created and again.pk == workload.pk and Workload.objects.count() == 1


def test_an_error_at_the_commit_rolls_everything_back(fleet, personas):
    """A deferred foreign key fails at the COMMIT, not at the INSERT: raised as Django's error, nothing stays."""
    with pytest.raises(IntegrityError, match="foreign key"), transaction.atomic():
        insert_rows_and_commit(
            AuditEvent(time=timezone.now(), actor_label="t", action="test.one-trip", target_type="t"),
            WorkloadEvent(workload_id=10**12, kind="x", message="no such workload"),
        )
    assert not AuditEvent.objects.filter(action="test.one-trip").exists()
    assert connection.get_autocommit() and Workload.objects.count() == 0  # the connection is usable


def test_only_for_the_outermost_transaction(fleet):
    with transaction.atomic(), transaction.atomic(), pytest.raises(RuntimeError):
        insert_rows_and_commit(
            AuditEvent(time=timezone.now(), actor_label="t", action="a", target_type="t"),
            AuditEvent(time=timezone.now(), actor_label="t", action="b", target_type="t"),
        )


LOCK = "SELECT pg_advisory_xact_lock(4243)"


def _event(action: str) -> AuditEvent:
    return AuditEvent(time=timezone.now(), actor_label="t", action=action, target_type="t")


def _idle() -> bool:
    """The connection is as a request leaves it: autocommit, no transaction open, the lock released."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        held = cursor.fetchone()[0]
    status = connection.connection.pgconn.transaction_status
    outside = connection.get_autocommit() and not connection.in_atomic_block
    return outside and status == TransactionStatus.IDLE and not held


def test_guarded_rows_outside_a_transaction_are_committed_in_one_round_trip(fleet, tmp_path):
    """BEGIN, the lock, the statement and COMMIT go out in one pipeline with one Sync (libpq's protocol trace): one
    round trip, whose reply carries the guard's row."""
    guard = Guard("SELECT %s::text AS why", ("decided",), ("why",))
    first, second = _event("test.guarded-trip"), _event("test.guarded-trip")
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    with open(tmp_path / "trace", "w") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
        try:
            taken = insert_rows_if_locked(LOCK, guard, first, second, computed={(1, "reason"): "why"})
        finally:
            pgconn.untrace()
    sent = [line.split("\t")[2] for line in (tmp_path / "trace").read_text().splitlines() if line.startswith("F\t")]
    assert sent.count("Sync") == 1 and sent.count("Execute") == 4  # BEGIN, the lock, the chain, COMMIT
    assert sent[: sent.index("Sync")].count("Execute") == 4  # all four before the one Sync (a Flush may follow)
    assert taken == {"why": "decided"} and second.reason == "decided" and first.pk and second.pk
    assert _idle()
    stored = dict(AuditEvent.objects.filter(action="test.guarded-trip").values_list("pk", "reason"))
    assert stored == {first.pk: "", second.pk: "decided"}


def test_a_refusing_guard_outside_a_transaction_commits_nothing(fleet):
    guard = Guard("SELECT 'no' AS why WHERE %s::integer > 0", (0,), ("why",))
    assert insert_rows_if_locked(LOCK, guard, _event("test.refused"), computed={}) is None
    assert _idle() and not AuditEvent.objects.filter(action="test.refused").exists()


def test_an_error_outside_a_transaction_rolls_back_and_leaves_the_connection_usable(fleet):
    """A deferred foreign key fails at the COMMIT (skipped by the pipeline: the transaction stays open and failed),
    a unique key at the statement: each raised as Django's error, nothing written, the connection idle again."""
    guard = Guard("SELECT 1 AS one", (), ("one",))
    with pytest.raises(IntegrityError, match="foreign key"):
        insert_rows_if_locked(
            LOCK,
            guard,
            _event("test.trip-error"),
            WorkloadEvent(workload_id=10**12, kind="x", message="no such workload"),
            computed={},
        )
    assert _idle() and not AuditEvent.objects.filter(action="test.trip-error").exists()
    kept = _event("test.trip-kept")
    insert_rows_if_locked(LOCK, guard, kept, computed={})
    twice = _event("test.trip-error")
    twice.pk = kept.pk
    with pytest.raises(IntegrityError, match="duplicate key"):
        insert_rows_if_locked(LOCK, guard, _event("test.trip-error"), twice, computed={})
    assert _idle() and not AuditEvent.objects.filter(action="test.trip-error").exists()
    assert list(AuditEvent.objects.filter(action__startswith="test.trip").values_list("pk", flat=True)) == [kept.pk]
