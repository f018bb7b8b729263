"""The demo's fabric: its simulated HGX H100 nodes advertise InfiniBand, the H100 pool declares it, and the
multi-node pre-training runs over RDMA in the simulation (its manifests request the device, its log says NCCL uses
InfiniBand), while single-node work and pools without a declared fabric are left to NCCL."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.backends.registry import get_backend
from apps.fleet.models import Node, NodePool
from apps.workloads.logs import log_source
from apps.workloads.models import Workload
from apps.workloads.rendering import render_workload

PASSWORD = "demo-network-password"


@pytest.fixture
def demo(db, django_capture_on_commit_callbacks):
    from apps.dashboard.demo import DEMO_CLUSTER, seed_demo

    with django_capture_on_commit_callbacks(execute=True):
        seed_demo("admin", PASSWORD)
    return DEMO_CLUSTER


def test_the_demo_declares_the_h100_pools_infiniband_once(demo):
    pool = NodePool.objects.get(cluster__name=demo, name="h100-training")
    assert (pool.fabric, pool.rdma_resource) == ("infiniband", "rdma/ib")
    assert NodePool.objects.get(cluster__name=demo, name="a100-training").fabric == "none"
    h100 = Node.objects.filter(cluster__name=demo, gpu_model__code="h100")
    assert h100.exists() and all(node.extended_resources == {"rdma/ib": 8} for node in h100)
    from apps.dashboard.demo import seed_demo

    seed_demo("admin", PASSWORD)  # re-running keeps the declaration: no second event
    assert AuditEvent.objects.filter(action="pool.update").count() == 1


def test_the_multi_node_pretraining_runs_over_infiniband_in_the_simulation(demo):
    pretrain = Workload.objects.get(name="llm-pretrain-70b")
    text, error = render_workload(pretrain)
    assert not error
    assert "rdma/ib: '1'" in text and "IPC_LOCK" in text and "NCCL_IB_HCA" in text
    single = Workload.objects.get(name="llm-sft-8b")  # one node: NCCL's own choice, no RDMA device
    text, error = render_workload(single)
    assert not error and "rdma/ib" not in text and "NCCL_IB" not in text
    pretrain.refresh_from_db()
    if pretrain.state != "running":
        pytest.fail(f"the demo's pre-training is {pretrain.state}: {pretrain.state_reason}")
    backend = get_backend(pretrain.cluster)
    lines = list(backend.stream_logs(log_source(pretrain), tail=200, follow=False, worker=None))
    nccl = [line for line in lines if "NCCL INFO Using network IB" in line]
    assert len(nccl) == 4 and all("NCCL_IB_HCA=mlx5" in line for line in nccl), lines[:20]
    vision = Workload.objects.get(name="vision-detector")  # two A100 nodes, no declared fabric: nothing said
    lines = list(backend.stream_logs(log_source(vision), tail=50, follow=False, worker=None))
    assert any("started on" in line for line in lines) and not any("NCCL INFO" in line for line in lines)
