"""Inventory from nodes and pods: GPU counts and labels, health, topology keys, taints, state, allocation."""

from __future__ import annotations

from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.types import Taint
from apps.fleet.models import Gpu, Node
from apps.fleet.services import sync_inventory
from tests.backends.kubernetes.conftest import make_cluster

CONSOLE = {"app.kubernetes.io/managed-by": "gpu-console", "gpu-console/tenant": "team-a", "gpu-console/queue": "train"}


def by_name(inventory):
    return {node.name: node for node in inventory.nodes}


def test_gpu_nodes_with_labels_health_topology_and_taints(db, fake):
    fake.add_node(
        "gpu-01",
        gpus=8,
        allocatable=7,
        labels={
            "site/rack": "r12",
            "site/leaf": "leaf-3",
            "nvidia.com/gpu.clique": "nvl-7",
            "gpu-console/pool": "h100-train",
            "gpu-console/pool-purpose": "batch-training",
        },
        taints=[{"key": "dedicated", "value": "training", "effect": "NoSchedule"}],
    )
    fake.add_node("gpu-02", gpus=8, ready=False)
    down = fake.add_node("gpu-03", gpus=8)
    with fake.lock:
        down_obj = fake.store.bucket(fake.resource("", "v1", "nodes"))[("", "gpu-03")]
        down_obj["status"]["conditions"] = [
            {"type": "Ready", "status": "Unknown", "message": "Kubelet stopped posting node status."}
        ]
    assert down
    cluster = make_cluster(fake, topology_labels={"rack": "site/rack", "leaf": "site/leaf"})
    nodes = by_name(KubernetesBackend(cluster).inventory())
    one = nodes["gpu-01"]
    assert (one.rack, one.leaf_switch, one.nvlink_domain) == ("r12", "leaf-3", "nvl-7")
    assert (one.pool, one.pool_purpose) == ("h100-train", "batch-training")
    assert one.taints == [Taint("dedicated", "training", "NoSchedule")]
    assert one.gpu_model == "NVIDIA-H100-80GB-HBM3" and one.gpu_allocatable == 7
    assert [g.health for g in one.gpus] == ["healthy"] * 7 + ["unhealthy"]
    assert "device plugin" in one.gpus[7].health_reason
    assert all(g.memory_mib == 81559 and g.model == "NVIDIA-H100-80GB-HBM3" for g in one.gpus)
    assert one.cpu_cores == 128 and one.memory_mib == 2113536
    assert (one.state, nodes["gpu-02"].state, nodes["gpu-03"].state) == ("ready", "not-ready", "down")
    assert "container runtime is down" in nodes["gpu-02"].state_reason
    assert "stopped posting" in nodes["gpu-03"].state_reason
    uuids = {g.uuid for n in nodes.values() for g in n.gpus}
    assert len(uuids) == 24


def test_mig_and_missing_memory_label_use_the_catalog(db, fake):
    fake.add_node(
        "mig-01",
        gpus=8,
        product="NVIDIA-A100-SXM4-80GB",
        labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.strategy": "mixed"},
        extra_resources={"nvidia.com/mig-1g.10gb": "56"},
    )
    with fake.lock:
        fake.store.bucket(fake.resource("", "v1", "nodes"))[("", "mig-01")]["metadata"]["labels"].pop(
            "nvidia.com/gpu.memory"
        )
    node = KubernetesBackend(make_cluster(fake)).inventory().nodes[0]
    assert all(g.mig_enabled for g in node.gpus)
    assert node.gpus[0].memory_mib == 81920  # from the console's catalog by product label


def test_pods_allocate_gpus_to_their_workloads(db, fake):
    fake.add_node("gpu-01", gpus=8)
    fake.add_namespace("team-a")
    fake.add_namespace("web")
    fake.add_pod("train-1-0-abcde", "team-a", "gpu-01", gpus=2, labels={**CONSOLE, "job-name": "train-1"})
    fake.add_pod("web-7d9f-x1", "web", "gpu-01", gpus=1)
    fake.add_pod("old-job-0", "team-a", "gpu-01", gpus=4, phase="Succeeded", labels={**CONSOLE, "job-name": "old"})
    hami = fake.add_pod("hami-0", "web", "gpu-01", gpus=1)
    with fake.lock:
        stored = fake.store.bucket(fake.resource("", "v1", "pods"))[("web", "hami-0")]
        stored["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpucores"] = "30"
    assert hami
    node = KubernetesBackend(make_cluster(fake)).inventory().nodes[0]
    held = sorted((",".join(g.allocated_to), g.allocated_fraction) for g in node.gpus if g.allocated_to)
    assert held == [("train-1", 1.0), ("train-1", 1.0), ("web/hami-0", 0.3), ("web/web-7d9f-x1", 1.0)]
    assert sum(1 for g in node.gpus if not g.allocated_to and g.allocated_fraction == 0.0) == 4  # "old" finished


def test_sync_inventory_stores_nodes_and_gpus(db, fake):
    for i in range(3):
        fake.add_node(f"gpu-{i:02d}", gpus=8, labels={"gpu-console/pool": "h100"})
    fake.add_namespace("team-a")
    fake.add_pod("train-1-0-abcde", "team-a", "gpu-00", gpus=8, labels={**CONSOLE, "job-name": "train-1"})
    cluster = make_cluster(fake)
    result = sync_inventory(cluster.pk)
    assert result.ok and result.added == 3, result.error
    node = Node.objects.get(cluster=cluster, name="gpu-00")
    assert node.gpu_model.code == "h100" and node.pool.name == "h100"
    assert (node.gpu_count, node.gpu_allocatable, node.gpu_allocated) == (8, 8, 8)
    assert Gpu.objects.filter(node__cluster=cluster).count() == 24
    assert set(Gpu.objects.filter(node=node).values_list("allocated_to", flat=True)) == {"train-1"}
    again = sync_inventory(cluster.pk)
    assert again.ok and again.unchanged == 3


def test_a_failing_sync_keeps_the_inventory_and_records_the_error(db, fake):
    fake.add_node("gpu-00", gpus=8)
    cluster = make_cluster(fake)
    assert sync_inventory(cluster.pk).ok
    fake.fail(503, path="/api/v1/pods", message="the server is currently unable to handle the request")
    result = sync_inventory(cluster.pk)
    cluster.refresh_from_db()
    assert not result.ok and cluster.status == "error"
    assert "unable to handle the request" in cluster.last_error
    assert Node.objects.filter(cluster=cluster).count() == 1


def test_time_sliced_nodes_count_physical_gpus_and_shares(db, fake):
    fake.add_node(
        "ts-01",
        gpus=32,  # the device plugin advertises 4 replicas of each of the 8 GPUs
        product="NVIDIA-L40S-SHARED",
        labels={
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
        },
    )
    fake.add_namespace("dev")
    fake.add_pod("nb-0", "dev", "ts-01", gpus=1)
    fake.add_pod("nb-1", "dev", "ts-01", gpus=1)
    node = KubernetesBackend(make_cluster(fake)).inventory().nodes[0]
    assert len(node.gpus) == 8 and node.gpu_allocatable == 8
    held = [(g.allocated_to, g.allocated_fraction) for g in node.gpus if g.allocated_to]
    assert held == [(["dev/nb-0", "dev/nb-1"], 0.5)]


def test_mps_nodes_count_physical_gpus_and_replicas_as_time_sliced_ones(db, fake):
    fake.add_node("mps-01", gpus=2, product="NVIDIA-L40S", mps=4)  # 8 replicas of nvidia.com/gpu
    fake.add_namespace("dev")
    for i in range(3):
        fake.add_pod(f"eval-{i}", "dev", "mps-01", gpus=1)
    node = KubernetesBackend(make_cluster(fake)).inventory().nodes[0]
    assert len(node.gpus) == 2 and node.gpu_allocatable == 2
    held = [(g.allocated_to, g.allocated_fraction) for g in node.gpus if g.allocated_to]
    assert held == [(["dev/eval-0", "dev/eval-1", "dev/eval-2"], 0.75)]


def test_pods_take_gpus_in_creation_order_across_pages_of_the_list(db, fake, monkeypatch):
    """The first sync reduces each page of pods to the GPUs they hold as it arrives; the order in which pods take a
    node's GPUs is still their creation order over the whole list, not the list's (namespace, name) order."""
    import gc

    from apps.backends.kubernetes import backend as backend_module

    fake.add_node("gpu-01", gpus=2)
    fake.add_namespace("team-a")
    created = {"a-late": "2026-11-30T12:00:00Z", "b-none": "2026-11-30T09:00:00Z", "c-early": "2026-11-30T10:00:00Z"}
    created |= {"d-mid": "2026-11-30T11:00:00Z", "e-done": "2026-11-30T08:00:00Z"}
    for name in created:
        gpus = 0 if name == "b-none" else 1
        fake.add_pod(name, "team-a", "gpu-01", gpus=gpus, phase="Succeeded" if name == "e-done" else "Running")
    with fake.lock:
        for (_ns, name), pod in fake.store.bucket(fake.resource("", "v1", "pods")).items():
            pod["metadata"]["creationTimestamp"] = created[name]
    collecting = []
    holder = backend_module.gpu_holder
    monkeypatch.setattr(backend_module, "gpu_holder", lambda pod: collecting.append(gc.isenabled()) or holder(pod))
    fake.reset_requests()
    was = gc.isenabled()
    node = KubernetesBackend(make_cluster(fake, page_size=2)).inventory().nodes[0]
    held = [(g.index, g.allocated_to) for g in node.gpus]
    assert held == [(0, ["team-a/c-early"]), (1, ["team-a/d-mid"])]
    pod_lists = fake.requests_to("GET", "/api/v1/pods")
    assert len(pod_lists) >= 2  # the four running pods in pages of 2 (the finished one is not asked for)
    # The garbage collector is paused while the pages are parsed and reduced, and as it was afterwards.
    assert collecting and not any(collecting)
    assert gc.isenabled() == was


def test_extended_resources_other_than_gpus_are_what_each_node_advertises(db, fake):
    """An RDMA device plugin's resource is recorded per node (the console's pools declare it: docs/networking.md);
    GPUs, MIG instances and the kubernetes.io domain's resources are not among them."""
    fake.add_node("ib-01", gpus=8, extra_resources={"rdma/ib": 1000, "nvidia.com/hostdev": 8})
    fake.add_node("mig-01", gpus=0, mig={"1g.10gb": 7})
    fake.add_node("plain-01", gpus=8)
    nodes = by_name(KubernetesBackend(make_cluster(fake)).inventory())
    assert nodes["ib-01"].extended_resources == {"nvidia.com/hostdev": 8, "rdma/ib": 1000}
    assert nodes["mig-01"].extended_resources == nodes["plain-01"].extended_resources == {}
