"""Submissions through a real Celery worker on Redis: coalesced wake-ups still carry every outbox row out once."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.backends.models import SimWorkload
from apps.core.models import WakeFlag
from apps.workloads.models import OutboxEntry, OutboxStatus, Workload
from apps.workloads.services.outbox import OUTBOX_WAKE
from tests.utils.personas import build_personas, fresh
from tests.utils.waiting import wait_until
from tests.workloads.conftest import build_fleet, training_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_burst_of_submissions_lands_each_once(live_celery):
    personas = build_personas()
    build_fleet(personas)  # the workload tests' simulated cluster and quota, committed for the worker
    client = APIClient()
    client.force_authenticate(fresh(personas.member_a))
    ids = []
    for i in range(6):  # six commits in quick succession: wake-ups mostly find a drain already queued
        body = {"kind": "training", "spec": training_spec(name=f"burst-{i}", gpus_per_worker=1)}
        response = client.post("/api/v1/workloads/", body, format="json", HTTP_IDEMPOTENCY_KEY=f"burst-{i}")
        assert response.status_code == 201, response.json()
        ids.append(response.json()["id"])
    done = wait_until(
        lambda: OutboxEntry.objects.filter(workload_id__in=ids, status=OutboxStatus.DONE).count() == 6, timeout=20.0
    )
    assert done, list(OutboxEntry.objects.filter(workload_id__in=ids).values_list("status", "last_error"))
    names = list(Workload.objects.filter(pk__in=ids).values_list("backend_name", flat=True))
    assert sorted(SimWorkload.objects.filter(name__in=names).values_list("name", flat=True)) == sorted(names)
    # Within their queue's guarantee, the submissions raised the drain's flag in the statement that wrote them
    # (apps/core/wakeup.py, raise_in_statement), and the drain cleared it before it looked.
    assert Workload.objects.filter(pk__in=ids, admission__reason__startswith="within guarantee").count() == 6
    assert wait_until(lambda: WakeFlag.objects.filter(key=OUTBOX_WAKE, raised_at=None).exists(), timeout=10.0)
