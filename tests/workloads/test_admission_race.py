"""Submissions racing for the last of a queue's guarantee, on separate connections: never more admitted than fits."""

import threading

import pytest
from django.db import connection
from django.db.models import Sum

from apps.backends.shares import SHARE_UNITS
from apps.tenancy.models import Admission
from apps.workloads import services
from apps.workloads.models import Workload
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec


@pytest.mark.django_db(transaction=True)
def test_simultaneous_submissions_never_exceed_the_guarantee(fleet, personas):
    """The queue holds 16 H100s; eight 4-GPU jobs arrive at once: four are admitted, four wait.

    Each decision takes the admission lock and then reads the queue's use in the same round trip
    (apps/tenancy/snapshot.py): were the read taken before the lock, several would see 0 used.
    """
    jobs = 8
    barrier = threading.Barrier(jobs)
    errors = []

    def submit(i):
        try:
            barrier.wait(timeout=10)
            services.submit_workload(
                fresh(personas.member_a),
                kind="training",
                spec=training_spec(name=f"race-{i}", gpus_per_worker=4),
                idempotency_key=f"race-{i}",
            )
        except Exception as exc:  # the assertion below reports it
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    admitted = Admission.objects.filter(state="admitted")
    assert admitted.aggregate(n=Sum("gpu_units"))["n"] == 16 * SHARE_UNITS and admitted.count() == 4
    waiting = Workload.objects.filter(state="pending")
    assert waiting.count() == 4 and Workload.objects.exclude(state="pending").count() == 4  # (tasks run eagerly)
    assert all("0 free within guarantee" in w.state_reason for w in waiting)
