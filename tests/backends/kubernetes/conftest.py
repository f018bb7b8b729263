"""Fixtures for the Kubernetes backend: a fake API server per test and a cluster pointing at it."""

from __future__ import annotations

import pytest

from apps.accounts.models import Tenant
from apps.backends.kubernetes.backend import KubernetesBackend
from apps.fleet.models import Cluster
from apps.tenancy.models import Queue, QueueBinding
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
