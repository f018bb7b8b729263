"""Quota push: the tenancy desired state (tenancy builds it, the backend renders and pushes it), a server-side
dry-run plan ("what will change"), drift."""

from __future__ import annotations

from apps.backends.kubernetes.backend import KubernetesBackend
from apps.fleet.models import GpuModel
from apps.tenancy.desired_state import build_desired_state
from apps.tenancy.models import Quota
from tests.backends.kubernetes.conftest import bind_queue, make_cluster, seed_nodes


def setup(fake, queueing="kueue"):
    seed_nodes(fake, count=1)
    cluster = make_cluster(fake, queueing=queueing)
    queue = bind_queue(cluster, "team-a", "train", ["team-a-train"])
    Quota.objects.create(queue=queue, gpu_model=GpuModel.objects.get(code="h100"), guaranteed=8, borrow_limit=4)
    return cluster, KubernetesBackend(cluster)


def test_plan_says_what_will_change_and_changes_nothing(db, fake):
    cluster, backend = setup(fake)
    plan = backend.quota_plan(build_desired_state(cluster))
    assert {c.action for c in plan} == {"create"}
    lines = [c.describe() for c in plan]
    assert "create ClusterQueue team-a-train" in lines and "create Namespace team-a-train" in lines
    assert "create ResourceQuota team-a-train/gpu-console-gpus" in lines
    assert fake.objects("kueue.x-k8s.io", "v1beta2", "clusterqueues") == []
    assert all(r.query.get("dryRun") == "All" for r in fake.requests_to("PATCH"))


def test_push_applies_the_stored_state_then_only_changes(db, fake):
    cluster, backend = setup(fake)
    first = backend.push_quota(build_desired_state(cluster))
    assert first.applied == len(backend.quota_objects(build_desired_state(cluster))[0]) and first.unchanged == 0
    queue = fake.get("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a-train")
    flavor = queue["spec"]["resourceGroups"][0]["flavors"][0]
    # Kueue's default configuration admits nothing a ClusterQueue does not cover: cpu and memory too, at 8 cores
    # and 64 GiB per GPU while the inventory has no node of the model
    assert flavor == {
        "name": "h100",
        "resources": [
            {"name": "cpu", "nominalQuota": 64, "borrowingLimit": 32},
            {"name": "memory", "nominalQuota": "512Gi", "borrowingLimit": "256Gi"},
            {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4},
        ],
    }
    hard = fake.get("", "v1", "resourcequotas", "gpu-console-gpus", "team-a-train")["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "12"}
    assert backend.push_quota(build_desired_state(cluster)).applied == 0
    # A changed quota: the next push changes what follows from it, and only that.
    Quota.objects.filter(queue__name="train").update(guaranteed=16, borrow_limit=0)
    changed = backend.push_quota(build_desired_state(cluster))
    assert "update ClusterQueue team-a-train: spec.resourceGroups" in changed.messages
    assert "update ResourceQuota team-a-train/gpu-console-gpus: spec.hard.requests.nvidia.com/gpu" in changed.messages
    assert fake.get("", "v1", "resourcequotas", "gpu-console-gpus", "team-a-train")["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "16"
    }


def test_a_queue_without_a_namespace_here_is_reported_not_invented(db, fake):
    cluster, backend = setup(fake)
    other = bind_queue(cluster, "team-b", "infer", [])
    Quota.objects.create(queue=other, gpu_model=GpuModel.objects.get(code="h100"), guaranteed=4)
    result = backend.push_quota(build_desired_state(cluster))
    assert (
        "Queue team-b/infer has no namespace on this cluster: nothing is rendered for it, and its guarantee is not "
        "lent here." in result.messages
    )
    assert fake.get("", "v1", "namespaces", "team-b-infer") is None


def test_drift_reports_missing_changed_and_leftover_objects(db, fake):
    cluster, backend = setup(fake)
    state = build_desired_state(cluster)
    assert backend.quota_drift(state).missing  # nothing pushed yet
    backend.push_quota(state)
    assert backend.quota_drift(state).clean
    # Someone edits the ClusterQueue by hand, and an old queue's LocalQueue is still there.
    with fake.lock:
        cq = fake.store.bucket(fake.resource("kueue.x-k8s.io", "v1beta2", "clusterqueues"))[("", "team-a-train")]
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = 64  # nvidia.com/gpu
    fake.seed(
        "kueue.x-k8s.io",
        "v1beta2",
        "localqueues",
        {
            "metadata": {
                "name": "old",
                "namespace": "team-a-train",
                "labels": {"app.kubernetes.io/managed-by": "gpu-console"},
            },
            "spec": {"clusterQueue": "team-a-old"},
        },
    )
    report = backend.quota_drift(state)
    assert report.changed == {"ClusterQueue team-a-train": [".spec.resourceGroups"]}
    assert report.extra == ["LocalQueue team-a-train/old"]
    assert "changed on the cluster: ClusterQueue team-a-train: spec.resourceGroups" in report.lines()
    assert "not desired any more (left in place): LocalQueue team-a-train/old" in report.lines()


def test_volcano_queues_are_pushed_on_a_volcano_cluster(db, fake):
    cluster, backend = setup(fake, queueing="volcano")
    state = build_desired_state(cluster)
    assert state.queueing == "volcano"
    backend.push_quota(state)
    # the H100 pool's subtree: h100 -> team-a-h100 -> team-a-train-h100, on the stock nvidia.com/gpu
    leaf = fake.get("scheduling.volcano.sh", "v1beta1", "queues", "team-a-train-h100")
    assert leaf["spec"]["parent"] == "team-a-h100"
    assert leaf["spec"]["deserved"] == {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 8}
    assert fake.get("scheduling.volcano.sh", "v1beta1", "queues", "team-a-h100")["spec"]["parent"] == "h100"
    assert fake.get("scheduling.volcano.sh", "v1beta1", "queues", "h100")["spec"]["parent"] == "root"
    assert backend.quota_drift(state).clean


# --- what the cluster would not act on (semantic drift) ----------------------------------------------------------


def console_job(name: str, namespace: str, local_queue: str, **status) -> dict:
    """A Job of the console's, as it applies them for Kueue: suspended, naming its LocalQueue by label."""
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "gpu-console",
                "gpu-console/kind": "training",
                "kueue.x-k8s.io/queue-name": local_queue,
            },
        },
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
        "status": status,
    }


def test_drift_names_a_local_queue_the_consoles_workloads_name_but_their_namespace_lacks(db, fake):
    """Kueue admits a Job only through the LocalQueue its queue-name label names in the Job's namespace
    (https://kueue.sigs.k8s.io/docs/concepts/local_queue/): without it the Job stays suspended forever."""
    cluster, backend = setup(fake)
    state = build_desired_state(cluster)
    backend.push_quota(state)
    assert backend.quota_drift(state).clean
    # Waiting Jobs of a queue whose binding to this namespace was removed (its LocalQueue pruned with it).
    fake.seed("batch", "v1", "jobs", console_job("train-1", "team-a-train", "team-a-old"))
    fake.seed("batch", "v1", "jobs", console_job("train-2", "team-a-train", "team-a-old"))
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    fake.seed("batch", "v1", "jobs", console_job("old-1", "team-a-train", "gone", **done))  # finished: no matter
    fake.seed("batch", "v1", "jobs", console_job("ok-1", "team-a-train", "team-a-train"))  # the pushed LocalQueue
    report = backend.quota_drift(state)
    assert report.inert == [
        "LocalQueue team-a-train/team-a-old: missing, and the console's workloads in team-a-train name it "
        "(Job train-1, Job train-2); Kueue never admits them"
    ]
    assert not report.clean and report.missing == [] and report.changed == {}
    assert f"not acted on by the cluster: {report.inert[0]}" in report.lines()


def test_drift_names_a_local_queue_whose_cluster_queue_is_gone(db, fake):
    cluster, backend = setup(fake)
    state = build_desired_state(cluster)
    backend.push_quota(state)
    fake.seed(
        "kueue.x-k8s.io",
        "v1beta2",
        "localqueues",
        {"metadata": {"name": "scratch", "namespace": "team-a-train"}, "spec": {"clusterQueue": "nowhere"}},
    )
    fake.seed("batch", "v1", "jobs", console_job("train-3", "team-a-train", "scratch"))
    assert backend.quota_drift(state).inert == [
        "LocalQueue team-a-train/scratch: its ClusterQueue 'nowhere' does not exist; Kueue never admits the "
        "console's workloads that name it (Job train-3)"
    ]


def test_drift_names_a_flavor_that_no_node_matches(db, fake):
    """Kueue puts a flavor's nodeLabels into the admitted pods' nodeSelector
    (https://kueue.sigs.k8s.io/docs/concepts/resource_flavor/): quota of a flavor no node has is never usable."""
    cluster, backend = setup(fake)  # one H100 node
    queue = bind_queue(cluster, "team-b", "infer", ["team-b-infer"])
    Quota.objects.create(queue=queue, gpu_model=GpuModel.objects.get(code="a100"), guaranteed=4)
    state = build_desired_state(cluster)
    backend.push_quota(state)
    report = backend.quota_drift(state)
    product = GpuModel.objects.get(code="a100").product_labels[0]
    assert report.inert == [
        f"ResourceFlavor a100: no node has the labels nvidia.com/gpu.product={product}; its quota admits workloads "
        "that no node can run"
    ]


def test_drift_names_a_volcano_pool_queue_whose_model_has_no_nodes(db, fake):
    cluster, backend = setup(fake, queueing="volcano")
    queue = bind_queue(cluster, "team-b", "infer", ["team-b-infer"])
    Quota.objects.create(queue=queue, gpu_model=GpuModel.objects.get(code="a100"), guaranteed=4)
    state = build_desired_state(cluster)
    backend.push_quota(state)
    product = GpuModel.objects.get(code="a100").product_labels[0]
    assert backend.quota_drift(state).inert == [
        f"Queue a100: no node has the labels nvidia.com/gpu.product={product}; the GPU pool's queues admit jobs "
        "that no node can run"
    ]


def test_the_inventory_gives_the_pools_and_the_cpu_and_memory_per_gpu(db, fake):
    """After an inventory sync the quota objects follow the nodes: a time-sliced pool (GFD's -SHARED product,
    replica count and sharing strategy) gets its own flavor, and cpu and memory come with each GPU as the nodes
    have them."""
    from apps.fleet.services import sync_inventory

    cluster, backend = setup(fake)  # gpu-01: 4 H100, 128 cores, 2113536 Mi allocatable
    fake.add_node(
        "ts-01",
        gpus=4,
        product="NVIDIA-H100-80GB-HBM3-SHARED",
        labels={"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
    )
    assert sync_inventory(cluster.pk).ok
    state = build_desired_state(cluster)
    assert sorted(n.name for n in state.nodes) == ["gpu-01", "ts-01"]
    backend.push_quota(state)
    flavor = fake.get("kueue.x-k8s.io", "v1beta2", "resourceflavors", "h100-shared-4")
    assert flavor["spec"]["nodeLabels"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
    }
    group = fake.get("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a-train")["spec"]["resourceGroups"][0]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    # 128 cores and 2064 GiB per 4 GPUs: 32 cores and 516 GiB per GPU, times the 8 guaranteed
    assert quotas["h100"] == {"cpu": 256, "memory": "4128Gi", "nvidia.com/gpu": 8}
    assert quotas["h100-shared-4"] == {"cpu": 256, "memory": "4128Gi", "nvidia.com/gpu": 32}
    assert backend.quota_drift(state).clean


def test_push_prunes_the_consoles_local_queues_it_no_longer_wants(db, fake):
    """A cluster pushed before LocalQueues were named after their ClusterQueue holds one named after the queue
    ("train"), which no workload names: the push replaces it, and leaves LocalQueues it does not manage alone."""
    cluster, backend = setup(fake)
    console = {
        "app.kubernetes.io/managed-by": "gpu-console",
        "gpu-console/tenant": "team-a",
        "gpu-console/queue": "train",
    }
    fake.add_namespace("team-a-train", console)
    for name, labels in (("train", console), ("someone-elses", {"team": "ml"})):
        fake.seed(
            "kueue.x-k8s.io",
            "v1beta2",
            "localqueues",
            {"metadata": {"name": name, "namespace": "team-a-train", "labels": labels}, "spec": {"clusterQueue": "x"}},
        )
    state = build_desired_state(cluster)
    plan = [c.describe() for c in backend.quota_plan(state)]
    assert "delete LocalQueue team-a-train/train" in plan and "create LocalQueue team-a-train/team-a-train" in plan
    assert not any("someone-elses" in line for line in plan)
    assert fake.get("kueue.x-k8s.io", "v1beta2", "localqueues", "train", "team-a-train") is not None  # a plan only

    result = backend.push_quota(state)
    assert "delete LocalQueue team-a-train/train" in result.messages
    names = sorted(o["metadata"]["name"] for o in fake.objects("kueue.x-k8s.io", "v1beta2", "localqueues"))
    assert names == ["someone-elses", "team-a-train"]
    # The new LocalQueue was applied before the old one was deleted: never a moment without one.
    writes = [(r.method, r.path) for r in fake.requests if r.method in ("PATCH", "DELETE") and "localqueues" in r.path]
    assert writes[-2:] == [
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a-train/localqueues/team-a-train"),
        ("DELETE", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a-train/localqueues/train"),
    ]
    again = backend.push_quota(state)
    assert again.applied == 0 and not any(m.startswith("delete") for m in again.messages)


def test_a_namespace_unbound_from_its_queue_loses_its_local_queue(db, fake):
    cluster, backend = setup(fake)
    backend.push_quota(build_desired_state(cluster))
    assert fake.get("kueue.x-k8s.io", "v1beta2", "localqueues", "team-a-train", "team-a-train") is not None
    from apps.tenancy.models import QueueBinding

    QueueBinding.objects.filter(cluster=cluster).update(namespaces=["team-a-other"])
    result = backend.push_quota(build_desired_state(cluster))
    assert "delete LocalQueue team-a-train/team-a-train" in result.messages
    assert fake.get("kueue.x-k8s.io", "v1beta2", "localqueues", "team-a-train", "team-a-train") is None
    assert fake.get("kueue.x-k8s.io", "v1beta2", "localqueues", "team-a-train", "team-a-other") is not None
