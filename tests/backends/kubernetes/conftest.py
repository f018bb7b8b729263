"""Fixtures for the Kubernetes backend: a fake API server per test and a cluster pointing at it."""

from __future__ import annotations

import pytest

from apps.accounts.models import Tenant
from apps.backends.kubernetes.backend import KubernetesBackend
from apps.fleet.models import Cluster, GpuModel
from apps.tenancy.desired_state import build_desired_state
from apps.tenancy.models import Queue, QueueBinding, Quota
from tests.backends.k8s_fake import FakeKubernetes

PRODUCT = "NVIDIA-H100-80GB-HBM3"


@pytest.fixture
def fake():
    server = FakeKubernetes().start()
    yield server
    server.stop()


def make_cluster(fake: FakeKubernetes, name: str = "k8s", **connection) -> Cluster:
    settings = {"api_url": fake.url, "queueing": "kueue", "request_timeout_s": 5, **connection}
    return Cluster.objects.create(name=name, kind="kubernetes", connection=settings)


def bind_queue(cluster: Cluster, tenant: str, queue: str, namespaces: list[str]) -> Queue:
    owner = Tenant.objects.filter(slug=tenant).first()
    if owner is None:
        owner = Tenant.objects.create(name=tenant, slug=tenant)
        owner.path = f"/{owner.pk}/"
        owner.save(update_fields=["path"])
    q, _ = Queue.objects.get_or_create(tenant=owner, name=queue)
    QueueBinding.objects.create(queue=q, cluster=cluster, namespaces=namespaces)
    return q


def push_queue(cluster: Cluster, tenant: str, queue: str, namespaces: list[str], **quotas: int) -> Queue:
    """A queue bound to `namespaces` with guaranteed quota per GPU model code (h100=8), and the console's quota
    desired state pushed to the cluster, as a platform admin's setup would leave it: namespaces, priority
    classes, and the queueing system's objects (LocalQueue, ClusterQueue, ... or Volcano queues)."""
    q = bind_queue(cluster, tenant, queue, namespaces)
    for code, guaranteed in (quotas or {"h100": 8}).items():
        Quota.objects.create(queue=q, gpu_model=GpuModel.objects.get(code=code), guaranteed=guaranteed)
    KubernetesBackend(cluster, sleep=lambda seconds: None).push_quota(build_desired_state(cluster))
    return q


def seed_nodes(fake: FakeKubernetes, count: int = 2, gpus: int = 4, **fields) -> list[str]:
    names = [f"gpu-{i:02d}" for i in range(1, count + 1)]
    for name in names:
        fake.add_node(name, gpus=gpus, **fields)
    return names


@pytest.fixture
def cluster(db, fake) -> Cluster:
    return make_cluster(fake)


@pytest.fixture
def backend(cluster) -> KubernetesBackend:
    return KubernetesBackend(cluster, sleep=lambda seconds: None)
