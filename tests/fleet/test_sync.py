"""Inventory sync: bulk upserts, unchanged resyncs, vanished nodes, failing backends, constant query counts."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.audit.models import AuditEvent
from apps.backends.base import RetryableBackendError
from apps.backends.types import GpuInfo, Inventory, NodeInfo, Taint
from apps.fleet import services
from apps.fleet.models import Cluster, ClusterStatus, Gpu, GpuModel, Node, NodeState


class FakeBackend:
    """Stands in for a backend's inventory() so sync is tested on its own."""

    def __init__(self):
        self.nodes: list[NodeInfo] = []
        self.error: Exception | None = None

    def inventory(self):
        if self.error:
            raise self.error
        return Inventory(nodes=self.nodes, taken_at=datetime.now(UTC))


def make_node(i: int, model="NVIDIA H100 80GB HBM3", gpus=8, allocated=0, leaf="leaf-1", unhealthy=()):
    return NodeInfo(
        name=f"gpu-{i:04d}",
        state="ready",
        pool="train",
        pool_purpose="batch-training",
        rack=f"rack-{i // 8}",
        leaf_switch=leaf,
        nvlink_domain=f"gpu-{i:04d}",
        gpu_model=model,
        gpu_allocatable=gpus - len(unhealthy),
        cpu_cores=96,
        memory_mib=2_000_000,
        labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        taints=[Taint("nvidia.com/gpu", "present")] if i == 0 else [],
        gpus=[
            GpuInfo(
                index=g,
                uuid=f"GPU-{i:04d}-{g}",
                model=model,
                memory_mib=81559,
                health="unhealthy" if g in unhealthy else "healthy",
                allocated_to=["job-1"] if g < allocated else [],
                allocated_fraction=1.0 if g < allocated else 0,
            )
            for g in range(gpus)
        ],
    )


@pytest.fixture
def fake(monkeypatch):
    backend = FakeBackend()
    monkeypatch.setattr(services, "get_backend", lambda cluster: backend)
    return backend


@pytest.fixture
def cluster(db):
    return Cluster.objects.create(name="c1", kind="simulated")


def test_first_sync_creates_nodes_and_gpus(cluster, fake):
    fake.nodes = [make_node(i, allocated=i % 3) for i in range(10)]
    result = services.sync_inventory(cluster.pk)
    assert (result.ok, result.nodes, result.added, result.updated, result.vanished) == (True, 10, 10, 0, 0)
    assert Node.objects.filter(cluster=cluster).count() == 10
    assert Gpu.objects.filter(node__cluster=cluster).count() == 80
    node = Node.objects.get(name="gpu-0002")
    h100 = GpuModel.objects.get(code="h100")
    assert node.gpu_model == h100 and node.gpu_allocated == 2 and node.pool.name == "train"
    assert Gpu.objects.filter(node=node, index=0).get().model == h100
    assert Node.objects.get(name="gpu-0000").taints == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.OK and cluster.last_sync_at and cluster.last_sync_duration_ms is not None
    assert AuditEvent.objects.filter(action="fleet.inventory_changed").get().after["added"] == 10


def test_unchanged_resync_touches_only_last_seen(cluster, fake):
    fake.nodes = [make_node(i) for i in range(10)]
    services.sync_inventory(cluster.pk)
    before = dict(Node.objects.values_list("name", "last_seen_at"))
    result = services.sync_inventory(cluster.pk)
    assert (result.added, result.updated, result.unchanged) == (0, 0, 10)
    after = dict(Node.objects.values_list("name", "last_seen_at"))
    assert all(after[n] > before[n] for n in before)
    assert AuditEvent.objects.filter(action="fleet.inventory_changed").count() == 1  # only the first sync changed


def test_changes_are_applied_and_vanished_nodes_marked(cluster, fake):
    fake.nodes = [make_node(i) for i in range(5)]
    services.sync_inventory(cluster.pk)
    fake.nodes = [make_node(0, allocated=8), make_node(1, unhealthy=(3,)), make_node(2), make_node(3)]
    fake.nodes[3].gpus.pop()  # GPU 7 of node 3 fell off the bus
    fake.nodes[3].gpu_allocatable = 7
    result = services.sync_inventory(cluster.pk)
    assert (result.updated, result.unchanged, result.vanished) == (3, 1, 1)
    assert Node.objects.get(name="gpu-0000").gpu_allocated == 8
    assert Node.objects.get(name="gpu-0001").gpu_unhealthy == 1
    assert Gpu.objects.get(node__name="gpu-0001", index=3).health == "unhealthy"
    assert not Gpu.objects.filter(node__name="gpu-0003", index=7).exists()
    gone = Node.objects.get(name="gpu-0004")
    assert gone.state == NodeState.VANISHED and gone.vanished_at
    event = AuditEvent.objects.filter(action="fleet.inventory_changed").order_by("-id").first()
    assert event.after["vanished_nodes"] == ["gpu-0004"]
    # A vanished node that comes back is live again.
    fake.nodes.append(make_node(4))
    services.sync_inventory(cluster.pk)
    back = Node.objects.get(name="gpu-0004")
    assert back.state == NodeState.READY and back.vanished_at is None


def test_new_nodes_are_copied_in_beside_known_nodes_upserted_in_the_same_sync(cluster, fake):
    """New nodes' rows are written with COPY, known ones upserted: every column as the ORM would write it."""
    fake.nodes = [make_node(0), make_node(1)]
    services.sync_inventory(cluster.pk)
    first_seen = Node.objects.get(name="gpu-0000").first_seen_at
    fake.nodes = [make_node(0, allocated=3), make_node(1), make_node(2, allocated=8)]
    result = services.sync_inventory(cluster.pk)
    assert (result.added, result.updated, result.unchanged) == (1, 1, 1)
    known, new = Node.objects.get(name="gpu-0000"), Node.objects.get(name="gpu-0002")
    assert known.first_seen_at == first_seen and known.gpu_allocated == 3
    assert new.first_seen_at >= first_seen and new.last_seen_at == known.last_seen_at and new.vanished_at is None
    assert (new.pool.name, new.gpu_model.code, new.gpu_allocated, new.cpu_cores) == ("train", "h100", 8, 96)
    assert new.labels == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"} and new.taints == []
    assert new.fingerprint and Gpu.objects.filter(node=new, allocated_to="job-1").count() == 8
    assert services.sync_inventory(cluster.pk).unchanged == 3


def test_a_database_without_copy_inserts_new_nodes_in_bulk(cluster, fake, monkeypatch):
    """COPY is PostgreSQL's: on another database (the demo's SQLite) new nodes and their GPUs are bulk-inserted,
    with the same rows."""
    import psycopg

    def no_copy(*args, **kwargs):
        raise AttributeError("this database has no COPY")

    monkeypatch.setattr(connection, "vendor", "sqlite")
    monkeypatch.setattr(psycopg.Cursor, "copy", no_copy)
    fake.nodes = [make_node(0, allocated=2), make_node(1)]
    result = services.sync_inventory(cluster.pk)
    assert (result.ok, result.added) == (True, 2)
    node = Node.objects.get(name="gpu-0000")
    assert (node.pool.name, node.gpu_model.code, node.gpu_allocated) == ("train", "h100", 2) and node.fingerprint
    assert Gpu.objects.filter(node__cluster=cluster).count() == 16
    assert Gpu.objects.filter(node=node, allocated_to="job-1").count() == 2


def test_failing_backend_keeps_last_good_inventory(cluster, fake):
    fake.nodes = [make_node(i) for i in range(3)]
    services.sync_inventory(cluster.pk)
    fake.error = RetryableBackendError("connection refused: https://k8s.example:6443")
    result = services.sync_inventory(cluster.pk)
    assert not result.ok and "connection refused" in result.error
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.ERROR and "connection refused" in cluster.last_error
    assert Node.objects.filter(cluster=cluster).exclude(state=NodeState.VANISHED).count() == 3
    fake.error = None
    assert services.sync_inventory(cluster.pk).ok
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.OK and cluster.last_error == ""


def test_concurrent_sync_is_skipped(cluster, fake):
    from django.utils import timezone

    Cluster.objects.filter(pk=cluster.pk).update(sync_started_at=timezone.now())
    assert services.sync_inventory(cluster.pk).skipped
    assert not Node.objects.exists()


def test_query_counts_equal_for_small_and_large_fleets(db, monkeypatch):
    """Same number of queries for 10 and 300 nodes (first, all changed, unchanged): bulk statements, not per row."""
    counts = {}
    for size in (10, 300):
        backend = FakeBackend()
        backend.nodes = [make_node(i) for i in range(size)]
        monkeypatch.setattr(services, "get_backend", lambda cluster, b=backend: b)
        cluster = Cluster.objects.create(name=f"size-{size}", kind="simulated")
        with CaptureQueriesContext(connection) as first:
            services.sync_inventory(cluster.pk)
        backend.nodes = [make_node(i, allocated=1) for i in range(size)]
        with CaptureQueriesContext(connection) as changed:
            services.sync_inventory(cluster.pk)
        with CaptureQueriesContext(connection) as unchanged:
            services.sync_inventory(cluster.pk)
        counts[size] = (len(first), len(changed), len(unchanged))
    assert counts[10] == counts[300], counts
    first, changed, unchanged = counts[300]
    assert first <= 17 and changed <= 17 and unchanged <= 9, counts


def test_a_pool_takes_the_taints_all_its_nodes_carry(cluster, fake):
    """NodePool.taints (what workloads on the pool tolerate) follow the nodes: the taints every node of the pool
    shares, never a node's own state (Kubernetes's condition and cordon taints, the autoscaler's, the console's
    runbook taints), and they change when the nodes' do."""
    from apps.fleet.models import NodePool

    reserved = Taint("dedicated", "training", "NoSchedule")
    own_state = [
        Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"),
        Taint("node.kubernetes.io/not-ready", "", "NoExecute"),
        Taint("node.cloudprovider.kubernetes.io/shutdown", "", "NoSchedule"),
        Taint("ToBeDeletedByClusterAutoscaler", "1718000000", "NoSchedule"),
        Taint("gpu-console/rma", "20250101T0000", "NoSchedule"),
    ]
    nodes = [make_node(i) for i in range(3)]
    for node in nodes:
        node.taints = [reserved, *own_state]  # every node: still only the reservation is the pool's
    nodes[0].taints.append(Taint("site/one-off", "x", "NoSchedule"))  # one node only
    fake.nodes = nodes
    services.sync_inventory(cluster.pk)
    pool = NodePool.objects.get(cluster=cluster, name="train")
    assert pool.taints == [{"key": "dedicated", "value": "training", "effect": "NoSchedule"}]

    # The site changes the reservation's value on every node: the pool follows.
    for node in nodes:
        node.taints = [Taint("dedicated", "inference", "NoSchedule")]
    services.sync_inventory(cluster.pk)
    pool.refresh_from_db()
    assert pool.taints == [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}]

    # A node without it joins the pool: no taint is shared any more.
    fake.nodes = [*nodes, make_node(7)]
    services.sync_inventory(cluster.pk)
    pool.refresh_from_db()
    assert pool.taints == []
