"""A simulated cluster with tenant A's queue "train" bound to it and a guarantee of 16 H100s."""

import pytest

from apps.fleet.models import GpuModel
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.tenancy import services as tenancy
from tests.utils.personas import fresh


@pytest.fixture
def fleet(personas):
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
