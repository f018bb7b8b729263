"""A simulated cluster with quota for the workload tests: tenant A's queue "train" bound to it."""

import pytest

from apps.fleet.models import GpuModel
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.tenancy import services as tenancy
from tests.utils.personas import fresh


@pytest.fixture
def fleet(personas):
    return build_fleet(personas)


def build_fleet(personas) -> dict:
    admin = fresh(personas.platform_admin)
    cluster = create_simulated_cluster(
        None, "sim", {"nodes": 4, "gpus_per_node": 8, "models": {"h100": 0.5, "a100": 0.5}, "seed": 9}
    )
    assert sync_inventory(cluster.pk).ok
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=16)
    train = tenancy.create_queue(admin, tenant=personas.a, name="train")
    tenancy.bind_queue(admin, train, cluster=cluster, namespaces=["a-train"])
    tenancy.set_quota(admin, queue=train, gpu_model=h100, guaranteed=16)
    return {"cluster": cluster, "queue": train, "h100": h100}


def training_spec(**overrides) -> dict:
    spec = {
        "name": "pretrain",
        "tenant": "a",
        "queue": "train",
        "tier": "training",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["python", "train.py"],
        "args": ["--epochs", "1"],
        "workers": 1,
        "gpus_per_worker": 8,
        "gpu_model": "h100",
        "max_runtime_s": 3600,
    }
    spec.update(overrides)
    return spec
