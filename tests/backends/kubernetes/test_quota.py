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
    assert flavor == {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4}]}
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
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 64
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
    leaf = fake.get("scheduling.volcano.sh", "v1beta1", "queues", "team-a-train")
    assert leaf["spec"]["parent"] == "team-a" and leaf["spec"]["deserved"] == {"nvidia.com/gpu-h100": 8}
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
