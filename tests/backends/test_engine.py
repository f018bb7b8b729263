"""The engine's time, determinism, workload lifecycle, usage and cost at fleet scale."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.backends.base import NotFoundError, PermanentBackendError
from apps.backends.models import SimCluster
from apps.backends.render.desired import DesiredState, GpuModelRef, QueueSpec, QuotaLine, TenantSpec
from apps.backends.simulator.engine import Engine
from apps.backends.simulator.specs import MAX_DURATION_S, MIN_DURATION_S
from apps.backends.types import BackendState, Sharing
from tests.backends.helpers import make_cluster, spec

pytestmark = pytest.mark.django_db

MIX = {"h100": 0.5, "a100": 0.25, "l40s": 0.25}


def workload_mix() -> list:
    """A varied batch whose outcomes and durations come from the seed."""
    kinds = [
        {"workers": 2, "gpus_per_worker": 8},
        {"gpus_per_worker": 2, "gpu_model": "a100"},
        {"sharing": Sharing.MIG, "mig_profile": "2g.20gb"},
        {"sharing": Sharing.TIME_SLICE, "gpu_fraction": 0.5},
    ]
    return [spec(f"w{i}", outcome=None, duration_s=None, **kinds[i % 4]) for i in range(24)]


def history(backend, names):
    """What happened to each workload, independent of when the cluster was created."""
    out = {}
    for name, status in backend.status(names).items():
        run = (status.finished_at - status.started_at) if status.finished_at and status.started_at else None
        out[name] = (status.state, status.reason, [(p.node, p.gpu_indexes) for p in status.placements], run)
    return out


def test_same_seed_same_fleet_and_same_history_however_time_is_ticked():
    _, one = make_cluster("one", nodes=8, models=MIX, seed=42)
    _, two = make_cluster("two", nodes=8, models=MIX, seed=42)
    _, other = make_cluster("other", nodes=8, models=MIX, seed=43)
    uuids = [[g.uuid for n in b.inventory().nodes for g in n.gpus] for b in (one, two, other)]
    assert uuids[0] == uuids[1] != uuids[2]
    names = [s.name for s in workload_mix()]
    for s in workload_mix():
        one.submit(s)
        two.submit(s)
    one.advance(6 * 3600)  # one jump
    for _ in range(36):  # many small steps
        two.advance(600)
    first, second = history(one, names), history(two, names)
    assert first == second
    states = {state for state, *_ in first.values()}
    assert BackendState.SUCCEEDED in states


def test_sampled_durations_and_seeded_failures():
    cluster, backend = make_cluster("sampled", nodes=64, models={"h100": 1.0}, seed=7)
    names = [f"job-{i}" for i in range(200)]
    with Engine.open(cluster) as engine:
        for name in names:
            engine.submit(spec(name, outcome=None, duration_s=None, gpus_per_worker=1))
    sims = {w.name: w for w in SimCluster.objects.get(cluster__name="sampled").workloads.all()}
    durations = [sims[n].duration_s for n in names]
    assert all(MIN_DURATION_S <= d <= MAX_DURATION_S for d in durations)
    assert len(set(durations)) > 100, "durations are drawn per workload"
    failing = [n for n in names if sims[n].fail_after_s is not None]
    assert 2 <= len(failing) <= 25, len(failing)  # about 5 %
    assert all(sims[n].fail_after_s < sims[n].duration_s for n in failing)
    backend.advance(MAX_DURATION_S + 1)
    statuses = backend.status(names)
    assert {statuses[n].state for n in failing} == {BackendState.FAILED}
    assert all(statuses[n].reason.startswith("exited with code 1 after") for n in failing)
    assert {s.state for n, s in statuses.items() if n not in failing} == {BackendState.SUCCEEDED}


def test_outcome_label_overrides_the_seed():
    _, backend = make_cluster("override", nodes=1)
    backend.submit(spec("doomed", outcome="fail", duration_s=100))
    backend.advance(100)
    status = backend.status(["doomed"])["doomed"]
    assert status.state == BackendState.FAILED
    assert (status.finished_at - status.started_at).total_seconds() < 100


def test_simulated_time_is_real_time_plus_the_offset():
    cluster, backend = make_cluster("clock", nodes=1)
    before = backend.inventory().taken_at
    backend.advance(7200)
    after = backend.inventory().taken_at
    assert timedelta(hours=2) <= after - before < timedelta(hours=2, seconds=5)
    assert SimCluster.objects.get(cluster=cluster).clock_offset_s == 7200
    with pytest.raises(PermanentBackendError, match="forward"):
        backend.advance(-1)


def test_workload_lifecycle_and_status():
    _, backend = make_cluster("life", nodes=1)
    first = backend.submit(spec("run", gpus_per_worker=8, duration_s=60))
    assert first.state == BackendState.RUNNING
    assert backend.submit(spec("run", gpus_per_worker=1)).backend_id == "run", "same name: the existing one"
    queued = backend.submit(spec("queued", gpus_per_worker=8))
    assert queued.state == BackendState.PENDING
    cancelled = backend.cancel("queued")
    assert cancelled.state == BackendState.CANCELLED and cancelled.finished_at is not None
    backend.advance(60)
    status = backend.status(["run", "missing"])
    assert status["run"].state == BackendState.SUCCEEDED and status["run"].placements == []
    assert [e.split(" ", 1)[1] for e in status["run"].events] == [
        "submitted: 1 × 8 GPUs",
        "started: 1 worker on gpu-0001",
        "succeeded: completed",
    ]
    assert status["missing"].state == BackendState.UNKNOWN
    assert backend.cancel("run").state == BackendState.SUCCEEDED, "cancelling a finished workload is no error"
    with pytest.raises(NotFoundError, match="no workload 'missing'"):
        backend.cancel("missing")


def test_cancel_running_frees_the_gpus_for_pending_work():
    _, backend = make_cluster("free", nodes=1)
    backend.submit(spec("first", gpus_per_worker=8))
    backend.submit(spec("second", gpus_per_worker=8))
    backend.cancel("first")
    assert backend.status(["second"])["second"].state == BackendState.RUNNING


def test_usage_counts_fractions_and_splits_at_since():
    _, backend = make_cluster("usage", nodes=3, models={"a100": 1.0})
    start = backend.inventory().taken_at
    backend.submit(spec("whole", workers=2, gpus_per_worker=8, duration_s=600))
    backend.submit(spec("slice", sharing=Sharing.MIG, mig_profile="1g.10gb", duration_s=700))
    backend.submit(spec("half", sharing=Sharing.TIME_SLICE, gpu_fraction=0.5, duration_s=800))
    backend.advance(300)
    middle = backend.inventory().taken_at
    backend.advance(1000)
    records = {r.backend_id: r for r in backend.usage_since(start)}
    assert records["whole"].gpu_fraction == 16 and records["whole"].gpu_seconds == pytest.approx(16 * 600, abs=1)
    assert records["slice"].gpu_fraction == pytest.approx(1 / 7)
    assert records["slice"].gpu_seconds == pytest.approx(700 / 7, abs=1)
    assert records["half"].gpu_seconds == pytest.approx(400, abs=1)
    assert {r.gpu_model for r in records.values()} == {"a100"}
    assert {r.tenant for r in records.values()} == {"team-a"}
    later = {r.backend_id: r for r in backend.usage_since(middle)}
    assert later["whole"].start == middle
    assert later["whole"].gpu_seconds == pytest.approx(16 * (600 - (middle - start).total_seconds()), abs=16)


def test_usage_of_a_drained_workload_counts_both_runs():
    _, backend = make_cluster("usage-drain", nodes=2)
    start = backend.inventory().taken_at
    backend.submit(spec("job", gpus_per_worker=8, duration_s=600))
    backend.advance(200)
    node = backend.status(["job"])["job"].placements[0].node
    backend.drain(node, "test")
    backend.advance(600)
    records = [r for r in backend.usage_since(start) if r.backend_id == "job"]
    assert len(records) == 2
    assert sum(r.gpu_seconds for r in records) == pytest.approx(8 * 800, abs=8)


def test_push_quota_stores_and_counts_changes():
    cluster, backend = make_cluster("quota", nodes=1)
    state = DesiredState(
        cluster="quota",
        tenants=(TenantSpec("a", "a", None),),
        queues=(QueueSpec("a", "train", quotas=(QuotaLine("h100", guaranteed=16, borrow_limit=8),)),),
        tiers=(),
        gpu_models=(GpuModelRef("h100", "H100", "NVIDIA-H100-80GB-HBM3", "h100"),),
    )
    assert backend.push_quota(state).applied == 1
    again = backend.push_quota(state)
    assert (again.applied, again.unchanged) == (0, 1)
    assert SimCluster.objects.get(cluster=cluster).quotas["a/train/h100"]["guaranteed"] == 16


def test_test_connection_reports_shape_and_time():
    _, backend = make_cluster("conn", nodes=32, models={"h100": 0.5, "a100": 0.3, "l40s": 0.2}, seed=9)
    report = backend.test_connection()
    assert report.ok
    assert "32 nodes × 8 GPUs (h100 16, a100 10, l40s 6), seed 9" in report.message
    assert "simulated time" in report.message


def test_backend_without_simulation_is_a_permanent_error():
    from apps.backends.simulator.backend import SimulatorBackend
    from apps.fleet.models import Cluster

    cluster = Cluster.objects.create(name="bare", kind="simulated")
    with pytest.raises(PermanentBackendError, match="has no simulation"):
        SimulatorBackend(cluster).inventory()


def test_query_count_does_not_grow_with_the_fleet():
    def queries(name: str, nodes: int) -> int:
        _, backend = make_cluster(name, nodes=nodes, seed=1)
        for i in range(nodes):
            backend.submit(spec(f"{name}-{i}", gpus_per_worker=4))
        backend.cordon(f"gpu-{1:04d}", "x")
        with CaptureQueriesContext(connection) as captured:
            backend.inventory()
        return len(captured)

    assert queries("small", 4) == queries("large", 64)


def test_inventory_of_a_full_size_busy_fleet():
    """Its time is measured in bench/fleet_bench.py, not asserted here."""
    cluster, backend = make_cluster("fleet", nodes=1280, models={"h100": 0.5, "a100": 0.3, "l40s": 0.2}, seed=5)
    with Engine.open(cluster) as engine:  # half the fleet busy, in one engine call to keep the test short
        for i in range(80):
            engine.submit(spec(f"job-{i}", workers=8, gpus_per_worker=8))
    inventory = backend.inventory()
    assert sum(len(n.gpus) for n in inventory.nodes) == 10_240
    assert sum(1 for n in inventory.nodes for g in n.gpus if g.allocated_to) == 80 * 8 * 8
