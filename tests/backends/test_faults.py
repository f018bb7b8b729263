"""Each fault kind's effect on inventory health, on running work and on the telemetry; clearing."""

from __future__ import annotations

import pytest

from apps.backends.base import NotFoundError
from apps.backends.simulator.engine import Engine
from apps.backends.simulator.services import clear_fault, inject_fault
from apps.backends.types import BackendState, Topology
from tests.backends.helpers import make_cluster, scrape_text, spec, value

pytestmark = pytest.mark.django_db

NODE = "gpu-0001"
HIT = 3  # the GPU hit by GPU faults


@pytest.fixture
def fleet():
    """Two H100 nodes; `victim` holds all 8 GPUs of gpu-0001, `bystander` all of gpu-0002."""
    cluster, backend = make_cluster("faults", nodes=2, seed=5)
    backend.submit(spec("victim", gpus_per_worker=8, duration_s=7200, topology=Topology.NODE))
    backend.submit(spec("bystander", gpus_per_worker=8, duration_s=7200))
    assert backend.status(["victim"])["victim"].placements[0].node == NODE
    return cluster, backend


def node(backend, name=NODE):
    return next(n for n in backend.inventory().nodes if n.name == name)


def state(backend, name):
    return backend.status([name])[name]


def metric(cluster, name, gpu=HIT):
    return value(scrape_text(cluster, NODE), name, gpu)


def test_xid79_fails_work_and_marks_the_gpu_unhealthy(fleet):
    cluster, backend = fleet
    inject_fault(None, cluster, NODE, "xid79", HIT)
    gpu = node(backend).gpus[HIT]
    assert (gpu.health, gpu.health_reason) == ("unhealthy", "GPU fell off the bus (XID 79)")
    assert all(g.health == "healthy" for g in node(backend).gpus if g.index != HIT)
    assert node(backend).gpu_allocatable == 7
    victim = state(backend, "victim")
    assert victim.state == BackendState.FAILED
    assert victim.reason == f"GPU fell off the bus (XID 79) on {NODE} GPU {HIT}"
    assert state(backend, "bystander").state == BackendState.RUNNING
    assert metric(cluster, "DCGM_FI_DEV_XID_ERRORS") == 79
    assert metric(cluster, "DCGM_FI_DEV_XID_ERRORS", 0) == 0
    assert metric(cluster, "DCGM_FI_DEV_GPU_UTIL") == 0
    again = backend.submit(spec("needs-8", gpus_per_worker=8))
    assert again.state == BackendState.PENDING and "1 unhealthy GPU" in again.reason


def test_xid48_counts_a_double_bit_error(fleet):
    cluster, backend = fleet
    inject_fault(None, cluster, NODE, "xid48", HIT)
    assert node(backend).gpus[HIT].health == "unhealthy"
    assert state(backend, "victim").state == BackendState.FAILED
    assert "double-bit ECC error (XID 48)" in state(backend, "victim").reason
    assert metric(cluster, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") == 1
    assert metric(cluster, "DCGM_FI_DEV_XID_ERRORS") == 48
    assert metric(cluster, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS") >= 1
    assert metric(cluster, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0) == 0


def test_row_remap_failure_keeps_work_running(fleet):
    cluster, backend = fleet
    inject_fault(None, cluster, NODE, "row-remap-failure", HIT)
    assert node(backend).gpus[HIT].health == "unhealthy"
    assert state(backend, "victim").state == BackendState.RUNNING
    assert metric(cluster, "DCGM_FI_DEV_ROW_REMAP_FAILURE") == 1
    assert metric(cluster, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS") >= 8
    assert metric(cluster, "DCGM_FI_DEV_ROW_REMAP_FAILURE", 0) == 0


def test_nvlink_errors_grow_while_the_fault_lasts_and_never_shrink(fleet):
    cluster, backend = fleet
    fault = inject_fault(None, cluster, NODE, "nvlink", HIT)
    assert node(backend).gpus[HIT].health == "warning"
    assert state(backend, "victim").state == BackendState.RUNNING
    backend.advance(600)
    counters = ("CRC_FLIT", "REPLAY", "RECOVERY")
    first = [metric(cluster, f"DCGM_FI_DEV_NVLINK_{c}_ERROR_COUNT_TOTAL") for c in counters]
    assert all(v > 0 for v in first)
    backend.advance(600)
    second = [metric(cluster, f"DCGM_FI_DEV_NVLINK_{c}_ERROR_COUNT_TOTAL") for c in counters]
    assert all(b > a for a, b in zip(first, second, strict=True))
    clear_fault(None, fault)
    cleared = [metric(cluster, f"DCGM_FI_DEV_NVLINK_{c}_ERROR_COUNT_TOTAL") for c in counters]
    backend.advance(600)
    later = [metric(cluster, f"DCGM_FI_DEV_NVLINK_{c}_ERROR_COUNT_TOTAL") for c in counters]
    assert all(c >= s for s, c in zip(second, cleared, strict=True)), "counters never go back"
    assert later == cleared, "a cleared fault adds nothing more"
    assert node(backend).gpus[HIT].health == "healthy"
    assert metric(cluster, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 0) == 0


def test_thermal_slowdown(fleet):
    cluster, backend = fleet
    inject_fault(None, cluster, NODE, "thermal", HIT)
    assert node(backend).gpus[HIT].health == "warning"
    assert state(backend, "victim").state == BackendState.RUNNING
    backend.advance(60)
    text = scrape_text(cluster, NODE)
    assert value(text, "DCGM_FI_DEV_GPU_TEMP", HIT) >= 88
    reasons = int(value(text, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", HIT))
    assert reasons & 0x48 == 0x48  # HW slowdown + HW thermal
    assert value(text, "DCGM_FI_DEV_SM_CLOCK", HIT) < value(text, "DCGM_FI_DEV_SM_CLOCK", 0)
    assert value(text, "DCGM_FI_DEV_THERMAL_VIOLATION", HIT) > 0
    assert value(text, "DCGM_FI_DEV_THERMAL_VIOLATION", 0) == 0


def test_exporter_down_leaves_the_node_and_work_alone(fleet, client):
    cluster, backend = fleet
    inject_fault(None, cluster, NODE, "exporter-down")
    assert node(backend).state == "ready"
    assert all(g.health == "healthy" for g in node(backend).gpus)
    assert state(backend, "victim").state == BackendState.RUNNING
    assert client.get(f"/simulator/faults/nodes/{NODE}/metrics").status_code == 503


def test_node_down_fails_its_work_and_takes_it_out_of_service(fleet, client):
    cluster, backend = fleet
    fault = inject_fault(None, cluster, NODE, "node-down")
    down = node(backend)
    assert (down.state, down.state_reason) == ("down", "node down (unreachable)")
    assert {g.health for g in down.gpus} == {"unknown"}
    assert state(backend, "victim").state == BackendState.FAILED
    assert state(backend, "victim").reason == f"node down (unreachable) on {NODE}"
    assert state(backend, "bystander").state == BackendState.RUNNING
    assert client.get(f"/simulator/faults/nodes/{NODE}/metrics").status_code == 503
    waiting = backend.submit(spec("after", gpus_per_worker=8))
    assert waiting.state == BackendState.PENDING and "1 node down" in waiting.reason
    clear_fault(None, fault)
    assert node(backend).state == "ready"
    assert state(backend, "after").state == BackendState.RUNNING, "clearing the fault lets queued work in"


def test_gpu_fault_without_an_index_hits_every_gpu_of_the_node(fleet):
    cluster, backend = fleet
    inject_fault(None, cluster, NODE, "xid79")
    assert {g.health for g in node(backend).gpus} == {"unhealthy"}
    assert node(backend).gpu_allocatable == 0
    assert {g.health for g in node(backend, "gpu-0002").gpus} == {"healthy"}


def test_clearing_returns_the_gpu(fleet):
    cluster, backend = fleet
    fault = inject_fault(None, cluster, NODE, "xid79", HIT)
    clear_fault(None, fault)
    assert node(backend).gpus[HIT].health == "healthy"
    assert metric(cluster, "DCGM_FI_DEV_XID_ERRORS") == 0, "a reset clears the last XID"
    assert backend.submit(spec("back", gpus_per_worker=8)).state == BackendState.RUNNING


def test_engine_rejects_unknown_targets(fleet):
    cluster, _ = fleet
    with Engine.open(cluster) as engine:
        with pytest.raises(NotFoundError, match=r"no node 'gpu-0099'.*gpu-0001 to gpu-0002"):
            engine.inject("gpu-0099", "xid79", 0)
        with pytest.raises(NotFoundError, match="no GPU 8 on node gpu-0001"):
            engine.inject(NODE, "xid79", 8)
        fault, created = engine.inject(NODE, "thermal", 1)
        assert created
        assert engine.inject(NODE, "thermal", 1) == (fault, False), "an identical active fault is not doubled"
