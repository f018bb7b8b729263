"""No starvation, proven on the simulator through the console (issue 19): a stream of 8-GPU jobs never delays a
waiting 32-GPU gang beyond the end of the jobs already running.

The console's clock and the simulated cluster's (real time + its offset, here 0) are both `timezone.now`, moved
forward by the test; every 10 minutes the console's loop runs once (admission pass, dispatch, outbox,
reconcile: apps/workloads/services/reconcile.tick) and the inventory is synced, as beat does. The simulator runs
every job to its max_runtime_s here (the worst case for the gang: by default it draws each run's length, up to
the limit, from the job's backend name, which carries the workload's id and so differs from one test run to the
next), and places a gang only on whole free nodes.

On the code before issue 19 the gang waits forever: each 8-GPU job submitted while it waits is admitted into the
GPUs the gang needs as soon as they free up (the submission's decision ignored the waiting gang).
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.fleet.models import GpuModel
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.tenancy import services as tenancy
from apps.workloads import services
from apps.workloads.models import Workload
from apps.workloads.services.reconcile import tick
from tests.utils import simulator
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec

pytestmark = pytest.mark.django_db
HOUR = 3600


@pytest.fixture
def clock(monkeypatch):
    """The console's and the simulator's clock, both `timezone.now`, moved by the test."""

    class Clock:
        now = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)

        def advance(self, minutes: float) -> None:
            self.now += timedelta(minutes=minutes)

    clock = Clock()
    monkeypatch.setattr(timezone, "now", lambda: clock.now)
    return clock


@pytest.fixture
def full_runs(monkeypatch):
    """Every simulated run lasts exactly its runtime limit, whatever its name draws."""
    simulator.full_runs(monkeypatch)


@pytest.fixture
def sim(personas, clock, full_runs):
    """Five nodes of 8 H100 (40 GPUs); tenant A's queue "train" guarantees all 40 on it."""
    admin = fresh(personas.platform_admin)
    cluster = create_simulated_cluster(
        None, "sim", {"nodes": 5, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 5}
    )
    assert sync_inventory(cluster.pk).ok
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=40)
    train = tenancy.create_queue(admin, tenant=personas.a, name="train")
    tenancy.bind_queue(admin, train, cluster=cluster, namespaces=["a-train"])
    tenancy.set_quota(admin, queue=train, gpu_model=h100, guaranteed=40, borrow_limit=0)
    return cluster


def submit(personas, capture, name: str, *, workers: int = 1, runtime_s: int) -> Workload:
    with capture(execute=True):
        workload, _ = services.submit_workload(
            fresh(personas.member_a),
            kind="training",
            spec=training_spec(name=name, workers=workers, gpus_per_worker=8, max_runtime_s=runtime_s),
        )
    return workload


def loop(cluster, capture) -> None:
    """One round of what beat runs: the console's tick, then an inventory sync."""
    with capture(execute=True):
        tick()
        assert sync_inventory(cluster.pk).ok
        tick()


def test_a_stream_of_8_gpu_jobs_never_delays_a_waiting_32_gpu_gang(
    sim, personas, clock, django_capture_on_commit_callbacks, client, api
):
    capture = django_capture_on_commit_callbacks
    start = clock.now
    # Four 8-GPU jobs run, ending in 1, 2, 3 and 4 hours: 32 of the 40 GPUs.
    running = [submit(personas, capture, f"run-{k}", runtime_s=k * HOUR) for k in (1, 2, 3, 4)]
    loop(sim, capture)
    assert {w.state for w in Workload.objects.filter(pk__in=[w.pk for w in running])} == {"running"}
    clock.advance(1)
    gang = submit(personas, capture, "gang", workers=4, runtime_s=HOUR)  # 4 × 8 GPUs, all at once
    assert gang.state == "pending"
    stream: list[Workload] = []
    reason = ""
    started = None
    held_back: set[str] = set()  # why stream jobs waited while the gang did
    for step in range(6 * 6):  # six hours, every ten minutes
        if step % 3 == 0:  # an 8-GPU job of 90 minutes every half hour
            stream.append(submit(personas, capture, f"stream-{step}", runtime_s=90 * 60))
        loop(sim, capture)
        gang.refresh_from_db()
        if step == 0:
            reason = gang.state_reason
            # The workload page and why-pending show the reservation and its expected start.
            client.force_login(personas.member_a)
            page = client.get(reverse("workloads:workload_detail", args=[gang.pk])).content.decode()
            assert 'data-testid="workload-reservation">holds 32 × H100-80GB-HBM3; expected start' in page
            why = api(fresh(personas.member_a)).get("/api/v1/analytics/why-pending/").json()
            assert {"id": gang.pk, "name": "gang", "tenant": "a", "expected_start": "2026-12-01T11:00:00+00:00"} in (
                why["reservations"]
            )
        if gang.state == "running":
            started = clock.now
            break
        held_back.update(
            Workload.objects.filter(pk__in=[w.pk for w in stream], state="pending").values_list(
                "state_reason", flat=True
            )
        )
        clock.advance(10)
    # The gang waited for the third running job (3 h after it began) and no longer: the fourth still runs then.
    assert reason.endswith("reserved from 2026-12-01 11:00 UTC (expected start)"), reason
    assert started is not None, gang.state_reason
    assert started <= start + timedelta(hours=3, minutes=10), started  # the loop's 10-minute step
    assert started < start + timedelta(hours=4)  # "beyond the end of the jobs already running"
    # Stream jobs that end before the gang's start ran in front of it (backfill); the others waited.
    reserved_start = start + timedelta(hours=3)
    in_front = Workload.objects.filter(pk__in=[w.pk for w in stream], started_at__lt=started)
    assert in_front.count() >= 2
    assert all(w.started_at + timedelta(minutes=90) <= reserved_start for w in in_front), [
        (w.name, w.started_at) for w in in_front
    ]
    assert "waiting behind a/gang, which holds a reservation from 2026-12-01 11:00 UTC" in held_back, held_back
