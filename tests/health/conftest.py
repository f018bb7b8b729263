"""A simulated fleet with tenant A's training queue bound to it, and helpers to run health cycles."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import F

from apps.backends.simulator.services import inject_fault
from apps.fleet.models import GpuModel, Node
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.health.ingest import run_cycle
from apps.health.models import NodeHealth
from apps.tenancy import services as tenancy
from tests.utils.personas import fresh


@pytest.fixture
def fleet(personas):
    """4 H100 nodes × 8 GPUs in one pool; tenant A's queue `train` with 32 guaranteed H100s."""
    admin = fresh(personas.platform_admin)
    cluster = create_simulated_cluster(
        None, "hsim", {"nodes": 4, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 5}
    )
    assert sync_inventory(cluster.pk).ok
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=32)
    train = tenancy.create_queue(admin, tenant=personas.a, name="train")
    tenancy.bind_queue(admin, train, cluster=cluster, namespaces=["a-train"])
    tenancy.set_quota(admin, queue=train, gpu_model=h100, guaranteed=32)
    return {"cluster": cluster, "queue": train, "h100": h100, "nodes": list(Node.objects.filter(cluster=cluster))}


def cycle(cluster):
    """One ingestion cycle, as if the previous one was 15 s ago (rates need a time base)."""
    NodeHealth.objects.filter(node__cluster=cluster, scraped_at__isnull=False).update(
        scraped_at=F("scraped_at") - timedelta(seconds=15)
    )
    return run_cycle(cluster.pk)


def training_spec(**overrides) -> dict:
    spec = {
        "name": "pretrain",
        "tenant": "a",
        "queue": "train",
        "tier": "training",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["python", "train.py"],
        "workers": 1,
        "gpus_per_worker": 8,
        "gpu_model": "h100",
        "max_runtime_s": 3600,
    }
    spec.update(overrides)
    return spec


def inject(cluster, node: str, kind: str, gpu: int | None = None):
    return inject_fault(None, cluster, node, kind, gpu, reason="test")
