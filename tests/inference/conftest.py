"""A simulated cluster with an inference queue for tenant A, and helpers to run services on it."""

from __future__ import annotations

import pytest

from apps.fleet.models import Cluster, GpuModel
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.tenancy import services as tenancy
from apps.workloads import services as workloads
from apps.workloads.models import Workload
from tests.utils.personas import fresh


@pytest.fixture
def serving(personas):
    admin = fresh(personas.platform_admin)
    cluster = create_simulated_cluster(
        None, "sim", {"nodes": 2, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 9}
    )
    assert sync_inventory(cluster.pk).ok
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=16)
    queue = tenancy.create_queue(admin, tenant=personas.a, name="serve")
    tenancy.bind_queue(admin, queue, cluster=cluster, namespaces=["a-serve"])
    tenancy.set_quota(admin, queue=queue, gpu_model=h100, guaranteed=16)
    return {"cluster": cluster, "queue": queue}


def service_spec(name: str = "chat", engine: str = "vllm", **overrides) -> dict:
    spec = {
        "name": name,
        "tenant": "a",
        "queue": "serve",
        "engine": engine,
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
        "tensor_parallel": 1,
        "replicas": 1,
    }
    spec.update(overrides)
    return spec


def run_service(personas, capture, **spec) -> Workload:
    """Submit an inference service as member A and let the outbox and reconcile make it running."""
    with capture(execute=True):
        workload, _ = workloads.submit_workload(fresh(personas.member_a), kind="inference", spec=service_spec(**spec))
    workloads.reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
    return workload


def move_to_http_cluster(workload: Workload, pattern: str) -> Cluster:
    """Re-home the service on a Kubernetes cluster whose metrics URL pattern points at a test server."""
    cluster = Cluster.objects.create(name="k8s", kind="kubernetes", connection={"inference_metrics_url": pattern})
    Workload.objects.filter(pk=workload.pk).update(cluster=cluster)
    workload.refresh_from_db()
    return cluster
