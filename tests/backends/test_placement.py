"""Placement through the simulator backend: gang, topology, MIG, time-slicing, MPS, models, taints, priority."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from apps.backends.base import PermanentBackendError
from apps.backends.simulator.services import inject_fault
from apps.backends.types import BackendState, Sharing, Taint, Topology
from apps.fleet.models import Cluster
from tests.backends.helpers import make_cluster, nodes_of, spec

pytestmark = pytest.mark.django_db

RUNNING, PENDING = BackendState.RUNNING, BackendState.PENDING


def status(backend, name):
    return backend.status([name])[name]


def gpus_of(backend, name):
    """(node, gpu index, fraction) of every GPU `name` holds."""
    return [
        (n.name, g.index, g.allocated_fraction)
        for n in backend.inventory().nodes
        for g in n.gpus
        if name in g.allocated_to
    ]


@pytest.fixture
def two_leaves():
    """4 nodes × 8 H100, one node per rack, two racks per leaf: gpu-0001/2 on leaf-01, gpu-0003/4 on leaf-02."""
    return make_cluster("leaves", nodes=4, gpus=8, nodes_per_rack=1, racks_per_leaf=2)[1]


def test_gang_is_all_or_nothing_within_a_leaf(two_leaves):
    backend = two_leaves
    backend.submit(spec("blocker", gpus_per_worker=8, duration_s=3600))
    assert nodes_of(status(backend, "blocker")) == {"gpu-0001"}  # leaf-01 keeps one free node
    result = backend.submit(spec("gang", workers=3, gpus_per_worker=8, gpu_model="h100", topology=Topology.LEAF))
    assert result.state == PENDING
    assert result.reason == "needs 3 × 8 × h100 within one leaf switch; largest fit is 2"
    assert gpus_of(backend, "gang") == [], "a gang that does not fit holds nothing"
    anywhere = backend.submit(spec("gang-any", workers=3, gpus_per_worker=8, topology=Topology.ANY))
    assert anywhere.state == RUNNING
    assert len(nodes_of(status(backend, "gang-any"))) == 3


def test_gang_min_starts_with_what_fits(two_leaves):
    backend = two_leaves
    backend.submit(spec("blocker", workers=2, gpus_per_worker=8))
    result = backend.submit(spec("elastic", workers=4, gang_min=2, gpus_per_worker=8))
    assert result.state == RUNNING
    assert len(status(backend, "elastic").placements) == 2
    too_many = backend.submit(spec("elastic-2", workers=4, gang_min=3, gpus_per_worker=4))
    assert too_many.state == PENDING
    assert too_many.reason.startswith("needs 3 of 4 × 4 × any model; largest fit is 0")


def test_leaf_topology_keeps_workers_under_one_leaf(two_leaves):
    backend = two_leaves
    backend.submit(spec("leaf", workers=2, gpus_per_worker=8, topology=Topology.LEAF))
    leaves = {n.leaf_switch for n in backend.inventory().nodes if n.name in nodes_of(status(backend, "leaf"))}
    assert len(leaves) == 1


def test_node_topology_puts_every_worker_on_one_node(two_leaves):
    backend = two_leaves
    backend.submit(spec("half-0", gpus_per_worker=4))
    backend.submit(spec("half-1", gpus_per_worker=4))
    assert nodes_of(status(backend, "half-0")) == nodes_of(status(backend, "half-1")), "bin-packed on one node"
    together = backend.submit(spec("together", workers=2, gpus_per_worker=4, topology=Topology.NODE))
    assert together.state == RUNNING
    assert len(nodes_of(status(backend, "together"))) == 1
    split = backend.submit(spec("split", workers=3, gpus_per_worker=4, topology=Topology.NODE))
    assert split.reason == "needs 3 × 4 × any model on one node; largest fit is 2"


def test_nvlink_topology_needs_an_nvlink_model():
    _, backend = make_cluster("pcie", nodes=2, models={"l40s": 1.0})
    result = backend.submit(spec("nv", workers=2, gpus_per_worker=2, topology=Topology.NVLINK))
    assert result.state == PENDING
    assert result.reason == "no GPU nodes with NVLink in this cluster"


def test_mig_slices_pack_seven_1g_on_one_a100():
    _, backend = make_cluster("mig", nodes=1, gpus=8, models={"a100": 1.0})
    result = backend.submit(spec("slices", workers=7, sharing=Sharing.MIG, mig_profile="1g.10gb", gpu_model="a100"))
    assert result.state == RUNNING
    placements = status(backend, "slices").placements
    assert {(p.node, tuple(p.gpu_indexes)) for p in placements} == {("gpu-0001", (0,))}
    gpu0 = backend.inventory().nodes[0].gpus[0]
    assert gpu0.mig_enabled and gpu0.allocated_fraction == pytest.approx(1.0)
    assert [i["profile"] for i in gpu0.mig_instances] == ["1g.10gb"] * 7
    assert {i["allocated_to"] for i in gpu0.mig_instances} == {"slices"}
    backend.submit(spec("eighth", sharing=Sharing.MIG, mig_profile="1g.10gb"))
    assert status(backend, "eighth").placements[0].gpu_indexes == [1]


def test_mig_profiles_share_a_gpu_by_compute_slices():
    _, backend = make_cluster("mig", nodes=1, gpus=2, models={"a100": 1.0})
    backend.submit(spec("three", sharing=Sharing.MIG, mig_profile="3g.40gb"))
    backend.submit(spec("four", sharing=Sharing.MIG, mig_profile="4g.40gb"))
    backend.submit(spec("another-three", sharing=Sharing.MIG, mig_profile="3g.40gb"))
    assert status(backend, "three").placements[0].gpu_indexes == [0]
    assert status(backend, "four").placements[0].gpu_indexes == [0]
    assert status(backend, "another-three").placements[0].gpu_indexes == [1]
    whole = backend.submit(spec("whole", gpus_per_worker=1))
    assert whole.state == PENDING, "a GPU in MIG mode is not handed out whole"


def test_mig_spec_errors_are_permanent():
    _, backend = make_cluster("mig", nodes=1, models={"a100": 1.0})
    with pytest.raises(PermanentBackendError, match=re.escape("l40s has no MIG profile '1g.10gb'; profiles: none")):
        backend.submit(spec("bad", sharing=Sharing.MIG, mig_profile="1g.10gb", gpu_model="l40s"))
    with pytest.raises(PermanentBackendError, match=re.escape("profiles: 1g.10gb, 1g.20gb")):
        backend.submit(spec("bad", sharing=Sharing.MIG, mig_profile="9g.90gb", gpu_model="a100"))
    with pytest.raises(PermanentBackendError, match="needs a mig_profile"):
        backend.submit(spec("bad", sharing=Sharing.MIG))


def test_time_slice_fractions_add_up_to_one_gpu():
    _, backend = make_cluster("ts", nodes=1, gpus=2)
    backend.submit(spec("thirds", workers=3, sharing=Sharing.TIME_SLICE, gpu_fraction=0.3))
    assert {tuple(p.gpu_indexes) for p in status(backend, "thirds").placements} == {(0,)}
    backend.submit(spec("fifth", sharing=Sharing.HAMI, gpu_fraction=0.2))
    assert status(backend, "fifth").placements[0].gpu_indexes == [1], "0.9 + 0.2 does not fit on GPU 0"
    backend.submit(spec("tenth", sharing=Sharing.TIME_SLICE, gpu_fraction=0.1))
    assert status(backend, "tenth").placements[0].gpu_indexes == [0], "the fullest GPU that fits is used first"
    gpus = backend.inventory().nodes[0].gpus
    assert gpus[0].allocated_fraction == pytest.approx(1.0)
    assert sorted(gpus[0].allocated_to) == ["tenth", "thirds"]
    assert gpus[1].allocated_fraction == pytest.approx(0.2)
    with pytest.raises(PermanentBackendError, match="gpu_fraction"):
        backend.submit(spec("bad", sharing=Sharing.TIME_SLICE, gpu_fraction=1.5))


def test_mps_replicas_share_a_gpu_of_their_own_split_only():
    """An MPS GPU runs one MPS server (exclusive-process compute mode) split into equal replicas: replicas of its
    split fill it; a replica of another split, time-sliced work or a whole GPU go elsewhere."""
    _, backend = make_cluster("mps", nodes=1, gpus=3, models={"l40s": 1.0})
    result = backend.submit(spec("quarters", workers=3, sharing=Sharing.MPS, gpu_fraction=0.25))
    assert result.state == RUNNING
    assert {tuple(p.gpu_indexes) for p in status(backend, "quarters").placements} == {(0,)}
    backend.submit(spec("half", sharing=Sharing.MPS, gpu_fraction=0.5))
    assert status(backend, "half").placements[0].gpu_indexes == [1], "GPU 0's replicas are quarters"
    backend.submit(spec("sliced", sharing=Sharing.TIME_SLICE, gpu_fraction=0.25))
    assert status(backend, "sliced").placements[0].gpu_indexes == [2], "no time-slice on an MPS GPU"
    backend.submit(spec("fourth", sharing=Sharing.MPS, gpu_fraction=0.25))
    assert status(backend, "fourth").placements[0].gpu_indexes == [0]
    blocked = backend.submit(spec("more", workers=2, sharing=Sharing.MPS, gpu_fraction=0.25))
    assert blocked.state == PENDING
    assert blocked.reason == "needs 2 × MPS replica (1/4) of one any model GPU; largest fit is 0"
    gpus = backend.inventory().nodes[0].gpus
    assert gpus[0].allocated_fraction == pytest.approx(1.0) and sorted(gpus[0].allocated_to) == ["fourth", "quarters"]
    backend.cancel("fourth")
    assert backend.submit(spec("again", sharing=Sharing.MPS, gpu_fraction=0.25)).state == RUNNING


def test_an_mps_gpu_is_free_for_any_mode_once_its_last_replica_leaves():
    _, backend = make_cluster("mps", nodes=1, gpus=1, models={"l40s": 1.0})
    backend.submit(spec("replica", sharing=Sharing.MPS, gpu_fraction=0.5))
    assert backend.submit(spec("whole", gpus_per_worker=1)).state == PENDING
    backend.cancel("replica")
    assert status(backend, "whole").state == RUNNING


def test_gpu_model_constraint():
    _, backend = make_cluster("mixed", nodes=2, models={"h100": 0.5, "l40s": 0.5})
    backend.submit(spec("on-l40s", gpus_per_worker=8, gpu_model="l40s"))
    node = nodes_of(status(backend, "on-l40s")).pop()
    assert next(n for n in backend.inventory().nodes if n.name == node).gpu_model == "NVIDIA L40S"
    second = backend.submit(spec("on-l40s-2", gpus_per_worker=1, gpu_model="l40s"))
    assert second.reason == "needs 1 × 1 × l40s; largest fit is 0"
    missing = backend.submit(spec("on-a100", gpu_model="a100"))
    assert missing.state == PENDING and missing.reason == "no a100 nodes in this cluster"
    with pytest.raises(PermanentBackendError, match="unknown GPU model 'x100'"):
        backend.submit(spec("bad", gpu_model="x100"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"gpus_per_worker": 9}, "between 1 and 8"),
        ({"workers": 0}, "workers must be"),
        ({"gang_min": 5, "workers": 4}, "gang_min must be"),
        ({"duration_s": 0}, "duration_s"),
        ({"outcome": "maybe"}, "sim/outcome"),
    ],
)
def test_impossible_specs_are_permanent_errors(fields, message):
    _, backend = make_cluster("v", nodes=1)
    with pytest.raises(PermanentBackendError, match=message):
        backend.submit(spec("bad", **fields))


def test_taints_block_unless_tolerated():
    _, backend = make_cluster("taints", nodes=2)
    backend.taint("gpu-0001", Taint("maintenance", "true", "NoSchedule"))
    backend.taint("gpu-0002", Taint("preferred", "", "PreferNoSchedule"))
    backend.submit(spec("plain", gpus_per_worker=8))
    assert nodes_of(status(backend, "plain")) == {"gpu-0002"}, "PreferNoSchedule does not block"
    waiting = backend.submit(spec("plain-2", gpus_per_worker=8))
    assert waiting.reason == "needs 1 × 8 × any model; largest fit is 0 (not counted: 1 node tainted)"
    tolerant = backend.submit(spec("tolerant", gpus_per_worker=8, labels={"tolerate:maintenance": ""}))
    assert tolerant.state == RUNNING and nodes_of(status(backend, "tolerant")) == {"gpu-0001"}


def test_the_pools_taints_and_the_specs_tolerations_are_tolerated_as_on_kubernetes():
    """Parity with the Kubernetes rendering: what the console's render context says the pool is tainted with, and
    the spec's own tolerations, let the workload onto tainted nodes in the simulator too."""
    from apps.backends.render.spec import Toleration, TrainingJobSpec
    from apps.backends.render.workload import WorkloadContext

    _, backend = make_cluster("parity", nodes=2)
    backend.taint("gpu-0001", Taint("dedicated", "training", "NoSchedule"))
    backend.taint("gpu-0002", Taint("example.com/spot", "", "NoSchedule"))
    source = TrainingJobSpec(
        name="own", tenant="team-a", queue="default", image="x:1", command=["x"], gpu_model="", gpus_per_worker=8
    )
    pool = spec("pool", gpus_per_worker=8)
    pool.context = WorkloadContext(
        name="pool",
        workload_id="pool",
        queue="team-a-default",
        tier="training",
        tolerations=[{"key": "dedicated", "value": "training", "effect": "NoSchedule"}],
    )
    assert backend.submit(pool).state == RUNNING and nodes_of(status(backend, "pool")) == {"gpu-0001"}
    own = spec("own", gpus_per_worker=8)
    own.source = replace(source, tolerations=[Toleration("example.com/spot", "Exists")])
    assert backend.submit(own).state == RUNNING and nodes_of(status(backend, "own")) == {"gpu-0002"}


def test_no_execute_taint_evicts_what_does_not_tolerate_it():
    _, backend = make_cluster("noexec", nodes=2)
    backend.submit(spec("plain", gpus_per_worker=8, topology=Topology.NODE))
    backend.submit(spec("tolerant", gpus_per_worker=8, labels={"tolerate:gpu-fault": "yes"}))
    plain_node = nodes_of(status(backend, "plain")).pop()
    tolerant_node = nodes_of(status(backend, "tolerant")).pop()
    backend.taint(plain_node, Taint("gpu-fault", "", "NoExecute"))
    backend.taint(tolerant_node, Taint("gpu-fault", "", "NoExecute"))
    evicted = status(backend, "plain")
    assert evicted.state == PENDING
    assert any(f"requeued: node {plain_node} tainted gpu-fault:NoExecute" in e for e in evicted.events)
    assert status(backend, "tolerant").state == RUNNING


def test_cordoned_and_down_nodes_are_counted_in_the_reason():
    _, backend = make_cluster("reasons", nodes=3)
    backend.cordon("gpu-0001", "maintenance")
    backend.submit(spec("fill", gpus_per_worker=8))
    inject_fault(None, Cluster.objects.get(name="reasons"), "gpu-0003", "node-down")
    result = backend.submit(spec("wait", gpus_per_worker=8))
    assert result.reason == "needs 1 × 8 × any model; largest fit is 0 (not counted: 1 node cordoned, 1 node down)"


def test_priority_then_submit_order():
    _, backend = make_cluster("prio", nodes=1)
    backend.submit(spec("blocker", gpus_per_worker=8, duration_s=600))
    backend.submit(spec("low", gpus_per_worker=8, priority=100))
    backend.submit(spec("high-1", gpus_per_worker=8, priority=900, duration_s=600))
    backend.submit(spec("high-2", gpus_per_worker=8, priority=900))
    backend.advance(601)
    states = {n: s.state for n, s in backend.status(["low", "high-1", "high-2"]).items()}
    assert states == {"low": PENDING, "high-1": RUNNING, "high-2": PENDING}
    backend.advance(600)
    states = {n: s.state for n, s in backend.status(["low", "high-1", "high-2"]).items()}
    assert states == {"low": PENDING, "high-1": BackendState.SUCCEEDED, "high-2": RUNNING}


def test_smaller_work_backfills_around_a_blocked_gang():
    _, backend = make_cluster("backfill", nodes=2)
    backend.submit(spec("half", gpus_per_worker=4))
    big = backend.submit(spec("big", workers=2, gpus_per_worker=8, priority=900))
    small = backend.submit(spec("small", gpus_per_worker=2, priority=100))
    assert big.state == PENDING and small.state == RUNNING


def test_drain_requeues_and_restarts_elsewhere():
    _, backend = make_cluster("drain", nodes=2)
    backend.submit(spec("job", gpus_per_worker=8, duration_s=600))
    node = nodes_of(status(backend, "job")).pop()
    backend.advance(300)
    result = backend.drain(node, "oncall: replace PSU")
    assert result.evicted == ["job"]
    moved = status(backend, "job")
    assert moved.state == RUNNING and node not in nodes_of(moved)
    assert any(f"requeued: node {node} drained (oncall: replace PSU)" in e for e in moved.events)
    backend.advance(599)
    assert status(backend, "job").state == RUNNING, "an evicted run restarts from the beginning"
    backend.advance(1)
    assert status(backend, "job").state == BackendState.SUCCEEDED
    inventory_node = next(n for n in backend.inventory().nodes if n.name == node)
    assert inventory_node.unschedulable and "oncall: replace PSU" in inventory_node.state_reason
    backend.resume(node)
    assert not next(n for n in backend.inventory().nodes if n.name == node).unschedulable
