"""A simulated fleet with quota for tenants A, A's team and B, rate cards, and helpers to run work on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from apps.backends.models import SimCluster
from apps.backends.registry import get_backend
from apps.chargeback import services as chargeback
from apps.chargeback.periods import month_start, next_month
from apps.fleet.models import GpuModel
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.tenancy import services as tenancy
from apps.workloads import services as workloads
from apps.workloads.models import Workload
from tests.utils.personas import fresh
from tests.utils.simulator import runs_to_the_end

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture
def fleet(personas):
    """4 nodes × 8 GPUs (H100 and MIG-capable A100); queues a/train, a-team/train, b/train; rates set."""
    admin = fresh(personas.platform_admin)
    cluster = create_simulated_cluster(
        None, "sim", {"nodes": 4, "gpus_per_node": 8, "models": {"h100": 0.5, "a100": 0.5}, "seed": 9}
    )
    assert sync_inventory(cluster.pk).ok
    models = {m.code: m for m in GpuModel.objects.all()}
    queues = {}
    for tenant in (personas.a, personas.b):
        for code in ("h100", "a100"):
            tenancy.set_guarantee_cap(admin, tenant=tenant, gpu_model=models[code], guaranteed=16)
    for tenant in (personas.a, personas.a_team, personas.b):
        queue = tenancy.create_queue(admin, tenant=tenant, name="train")
        tenancy.bind_queue(admin, queue, cluster=cluster, namespaces=[f"{tenant.slug}-train"])
        for code in ("h100", "a100"):
            tenancy.set_quota(admin, queue=queue, gpu_model=models[code], guaranteed=8 if tenant != personas.a else 0)
        queues[tenant.slug] = queue
    chargeback.set_rate(admin, gpu_model=models["h100"], rate="2.50", effective_from=LONG_AGO)
    chargeback.set_rate(admin, gpu_model=models["a100"], rate="1.40", effective_from=LONG_AGO)
    return {"cluster": cluster, "models": models, "queues": queues, "admin": admin}


def training_spec(**overrides) -> dict:
    spec = {
        "name": "job",
        "tenant": "a-team",
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


def run(user, capture, **overrides) -> Workload:
    """Submit through the console and let the outbox and reconcile place it on the simulator."""
    with capture(execute=True):
        workload, _ = workloads.submit_workload(fresh(user), kind="training", spec=training_spec(**overrides))
    workloads.reconcile_workloads()
    workload.refresh_from_db()
    runs_to_the_end(workload)
    return workload


def advance(cluster, seconds: float) -> None:
    get_backend(cluster).advance(seconds)


def set_sim_time(cluster, at: datetime) -> None:
    """Move the cluster's simulated clock to `at` (forward only, as the simulator allows)."""
    sim = SimCluster.objects.get(cluster=cluster)
    sim.clock_offset_s = (at - timezone.now()).total_seconds()
    sim.save(update_fields=["clock_offset_s"])


def before_month_end(minutes: int) -> datetime:
    """`minutes` before the start of a month at least one month ahead."""
    return next_month(next_month(month_start(timezone.now()))) - timedelta(minutes=minutes)
