"""A real Celery worker on Redis: tasks sent on commit run; rolled-back work never runs; redelivery runs once."""

from __future__ import annotations

import pytest
from django.db import transaction

from apps.operations.models import Operation, OperationStatus
from apps.operations.services import start_operation
from apps.operations.tasks import run_operation_task
from tests.operations import handlers
from tests.utils.personas import build_personas, fresh
from tests.utils.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_task_sent_on_commit_runs_in_the_worker(live_celery):
    handlers.CALLS.clear()
    personas = build_personas()
    op = start_operation(fresh(personas.member_a), "test.count", tenant=personas.a)
    assert wait_until(lambda: Operation.objects.get(pk=op.pk).status == OperationStatus.SUCCEEDED)
    assert [op.pk] == handlers.CALLS


def test_rolled_back_transaction_never_runs(live_celery):
    handlers.CALLS.clear()
    personas = build_personas()
    with pytest.raises(RuntimeError), transaction.atomic():
        start_operation(fresh(personas.member_a), "test.count", tenant=personas.a)
        raise RuntimeError("rollback")
    # Prove the worker is alive and idle by running a later operation through it.
    marker = start_operation(fresh(personas.member_a), "test.count", tenant=personas.a)
    assert wait_until(lambda: Operation.objects.get(pk=marker.pk).status == OperationStatus.SUCCEEDED)
    assert [marker.pk] == handlers.CALLS
    assert Operation.objects.count() == 1


def test_duplicate_delivery_runs_once(live_celery):
    handlers.CALLS.clear()
    personas = build_personas()
    op = start_operation(fresh(personas.member_a), "test.count", tenant=personas.a)
    run_operation_task.delay(op.pk)  # the broker delivers the same work twice
    run_operation_task.delay(op.pk)
    marker = start_operation(fresh(personas.member_a), "test.count", tenant=personas.a)
    assert wait_until(lambda: Operation.objects.get(pk=marker.pk).status == OperationStatus.SUCCEEDED)
    assert handlers.CALLS.count(op.pk) == 1
    assert Operation.objects.get(pk=op.pk).attempts == 1
