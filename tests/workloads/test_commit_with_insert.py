"""Issue 23: a submission's rows and its COMMIT go to PostgreSQL in one round trip (`insert_rows_and_commit`).

Committed rows only (transaction=True): the submission's transaction is the outermost one, as in a request."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from psycopg.pq import TransactionStatus

from apps.audit.models import AuditEvent
from apps.core.inserts import insert_rows_and_commit
from apps.tenancy.models import Admission
from apps.workloads import services
from apps.workloads.models import OutboxEntry, Workload, WorkloadEvent
from apps.workloads.services import outbox
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_submission_commits_its_rows_with_the_insert_and_wakes_the_outbox_after(fleet, personas, monkeypatch):
    woken = []

    def wake():  # an on-commit hook: runs after the commit, outside the pipeline
        woken.append((connection.in_atomic_block, connection.connection.pgconn.transaction_status))

    monkeypatch.setattr(outbox, "wake_outbox", wake)
    workload, created = services.submit_workload(
        fresh(personas.member_a), kind="training", spec=training_spec(), idempotency_key="one-trip"
    )
    assert created and workload.pk and workload.admission.pk and not workload._state.adding
    assert woken == [(False, TransactionStatus.IDLE)]
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
