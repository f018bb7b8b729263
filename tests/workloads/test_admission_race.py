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


@pytest.mark.django_db(transaction=True)
def test_simultaneous_submissions_within_the_guarantee_never_take_what_a_borrower_holds(fleet, personas, monkeypatch):
    """Queue a/train guarantees 16 H100s and has lent 8 of them to tenant B's queue; eight 4-GPU jobs of a/train
    arrive at once. Each is decided by PostgreSQL's guard in the statement that writes it (within the guarantee,
    less what is lent: apps/tenancy/within_guarantee.py): two are admitted, by the guard, and the others wait for
    the lent GPUs (the engine decides them). Were the guard's read taken before the lock, or without what is lent,
    more would be admitted."""
    from apps.core import inserts
    from apps.fleet.models import Cluster, GpuModel
    from apps.tenancy.models import PriorityTier, Queue, QueueBinding, Quota
    from apps.tenancy.services.admissions import submit_admission
    from apps.workloads.services import submission

    h100 = GpuModel.objects.get(code="h100")
    borrower = Queue.objects.create(tenant=personas.b, name="borrow")
    QueueBinding.objects.create(queue=borrower, cluster=Cluster.objects.get(name="sim"))
    Quota.objects.create(queue=borrower, gpu_model=h100, guaranteed=0)
    training = PriorityTier.objects.get(name="training")
    lent = submit_admission(name="workload:b/borrower", queue=borrower, gpu_model=h100, gpus=8, tier=training)
    assert lent.state == "admitted" and lent.borrowed_from == {str(fleet["queue"].pk): 8 * SHARE_UNITS}
    by_guard = []

    def counted(*args, **kwargs):
        taken = inserts.insert_rows_if_locked(*args, **kwargs)
        by_guard.append(taken is not None)
        return taken

    monkeypatch.setattr(submission, "insert_rows_if_locked", counted)
    jobs = 8
    barrier = threading.Barrier(jobs)
    errors = []

    def submit(i):
        try:
            barrier.wait(timeout=10)
            services.submit_workload(
                fresh(personas.member_a),
                kind="training",
                spec=training_spec(name=f"lent-{i}", gpus_per_worker=4),
                idempotency_key=f"lent-{i}",
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
    own = Admission.objects.filter(state="admitted", queue=fleet["queue"])
    assert own.aggregate(n=Sum("gpu_units"))["n"] == 8 * SHARE_UNITS and own.count() == 2
    assert sorted(by_guard) == [False] * 6 + [True] * 2  # both admitted by the guard; the six refused by it
    assert Workload.objects.filter(state="pending").count() == 6
    assert sorted(own.values_list("reason", flat=True)) == ["within guarantee (4 of 16)", "within guarantee (8 of 16)"]
