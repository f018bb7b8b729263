"""Contract checks on the requests themselves: method, path, content type, query and body of each call,
and strict validation of every object the backend sends (built-ins per Kubernetes version, custom
objects against the vendored CRDs)."""

from __future__ import annotations

import pytest

from apps.backends.render.validate import validate_objects
from apps.backends.types import Taint, WorkloadSpec
from apps.fleet.models import GpuModel
from apps.tenancy.desired_state import build_desired_state
from apps.tenancy.models import Quota
from tests.backends.console_specs import console_spec
from tests.backends.kubernetes.conftest import bind_queue, make_cluster, seed_nodes
from tests.backends.kubernetes.scenario import run_everything

APPLY = "application/apply-patch+yaml"


def spec(name: str = "train-1", **fields) -> WorkloadSpec:
    fields.setdefault("gpus_per_worker", 2)
    return console_spec(name, command=["sleep", "600"], namespace="team-a-train", **fields)


@pytest.fixture
def ready(db, fake):
    """A backend with two 4-GPU nodes and the quota objects of queue team-a/train pushed."""
    from apps.backends.kubernetes.backend import KubernetesBackend

    seed_nodes(fake, count=2, gpus=4)
    cluster = make_cluster(fake)
    queue = bind_queue(cluster, "team-a", "train", ["team-a-train"])
    Quota.objects.create(queue=queue, gpu_model=GpuModel.objects.get(code="h100"), guaranteed=8)
    backend = KubernetesBackend(cluster, sleep=lambda seconds: None)
    backend.push_quota(build_desired_state(cluster))
    fake.reset_requests()
    return backend


def test_cordon_is_a_strategic_merge_patch_with_the_console_annotations(ready, fake):
    ready.cordon("gpu-01", "xid 79 on GPU 3", by="alice")
    (patch,) = fake.requests_to("PATCH")
    assert patch.path == "/api/v1/nodes/gpu-01"
    assert patch.content_type == "application/strategic-merge-patch+json"
    annotations = patch.body["metadata"]["annotations"]
    assert patch.body["spec"] == {"unschedulable": True}
    assert annotations["gpu-console/cordoned-by"] == "alice"
    assert annotations["gpu-console/cordon-reason"] == "xid 79 on GPU 3"
    assert annotations["gpu-console/cordoned-at"].endswith("Z")


def test_uncordon_removes_the_annotations_under_the_resource_version_it_read(ready, fake):
    ready.cordon("gpu-01", "x")
    version = fake.get("", "v1", "nodes", "gpu-01")["metadata"]["resourceVersion"]
    fake.reset_requests()
    ready.uncordon("gpu-01")
    get, patch = fake.requests
    assert (get.method, patch.method) == ("GET", "PATCH")
    assert patch.content_type == "application/strategic-merge-patch+json"
    assert patch.body == {
        "metadata": {
            "resourceVersion": version,
            "annotations": {
                "gpu-console/cordoned-by": None,
                "gpu-console/cordon-reason": None,
                "gpu-console/cordoned-at": None,
            },
        },
        "spec": {"unschedulable": False},
    }
    node = fake.get("", "v1", "nodes", "gpu-01")
    assert not node["spec"]["unschedulable"] and "gpu-console/cordoned-by" not in node["metadata"]["annotations"]


def test_taints_replace_the_list_by_merge_patch_with_a_resource_version(ready, fake):
    ready.taint("gpu-01", Taint("dedicated", "inference", "NoSchedule"))
    ready.taint("gpu-01", Taint("gpu-console/xid", "", "NoExecute"))
    ready.taint("gpu-01", Taint("dedicated", "inference", "NoSchedule"))  # already there: no write
    patches = fake.requests_to("PATCH")
    assert len(patches) == 2
    assert {p.content_type for p in patches} == {"application/merge-patch+json"}
    assert all(p.body["metadata"]["resourceVersion"] for p in patches)
    assert patches[1].body["spec"]["taints"] == [
        {"key": "dedicated", "effect": "NoSchedule", "value": "inference"},
        {"key": "gpu-console/xid", "effect": "NoExecute"},
    ]
    ready.untaint("gpu-01", "dedicated")
    assert fake.get("", "v1", "nodes", "gpu-01")["spec"]["taints"] == [
        {"key": "gpu-console/xid", "effect": "NoExecute"}
    ]


def test_submit_applies_each_object_with_the_field_manager_and_force(ready, fake):
    result = ready.submit(spec())
    patches = fake.requests_to("PATCH")
    assert [p.path for p in patches] == [
        "/api/v1/namespaces/team-a-train/services/train-1",
        "/apis/batch/v1/namespaces/team-a-train/jobs/train-1",
    ]
    for patch in patches:
        assert patch.content_type == APPLY
        assert patch.query == {"fieldManager": "gpu-console", "force": "true"}
    job = patches[1].body
    assert job["spec"]["suspend"] is True and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-train"
    assert result.backend_id == "train-1"
    # Once Kueue has admitted the Job (unsuspended it), the same spec again must not re-apply `suspend: true`.
    fake.advance(5)
    assert fake.get("batch", "v1", "jobs", "train-1", "team-a-train")["spec"]["suspend"] is False
    fake.reset_requests()
    again = ready.submit(spec())
    assert again.backend_id == "train-1" and again.state == "running"
    assert fake.requests_to("PATCH") == []
    assert fake.get("batch", "v1", "jobs", "train-1", "team-a-train")["spec"]["suspend"] is False


def test_cancel_deletes_the_job_in_the_foreground_and_its_service_in_the_background(ready, fake):
    ready.submit(spec())
    fake.advance(5)
    fake.reset_requests()
    ready.cancel("train-1")
    deletes = fake.requests_to("DELETE")
    assert [(d.path, d.body["propagationPolicy"]) for d in deletes] == [
        ("/api/v1/namespaces/team-a-train/services/train-1", "Background"),
        ("/apis/batch/v1/namespaces/team-a-train/jobs/train-1", "Foreground"),
    ]
    assert all(d.body["kind"] == "DeleteOptions" and d.body["apiVersion"] == "v1" for d in deletes)


def test_drain_lists_the_node_s_pods_and_posts_policy_v1_evictions(db, fake):
    from apps.backends.kubernetes.backend import KubernetesBackend

    seed_nodes(fake, count=1, gpus=8)
    fake.add_namespace("web")
    for i in range(3):
        fake.add_pod(f"p{i}", "web", "gpu-01", gpus=1)
    cluster = make_cluster(fake, drain_grace_period_s=15, page_size=2)
    KubernetesBackend(cluster, sleep=lambda s: None).drain("gpu-01", "rma")
    lists = fake.requests_to("GET", "/api/v1/pods")
    assert [r.query.get("continue", "") != "" for r in lists] == [False, True]
    assert all(r.query["fieldSelector"] == "spec.nodeName=gpu-01" and r.query["limit"] == "2" for r in lists)
    evictions = fake.requests_to("POST")
    assert [e.path for e in evictions] == [f"/api/v1/namespaces/web/pods/p{i}/eviction" for i in range(3)]
    for i, eviction in enumerate(evictions):
        assert eviction.content_type == "application/json"
        assert eviction.body == {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": f"p{i}", "namespace": "web"},
            "deleteOptions": {"gracePeriodSeconds": 15},
        }


def test_inventory_reads_nodes_and_pods_in_pages(db, fake):
    from apps.backends.kubernetes.backend import KubernetesBackend

    seed_nodes(fake, count=5, gpus=8)
    cluster = make_cluster(fake, page_size=2)
    inventory = KubernetesBackend(cluster).inventory()
    assert len(inventory.nodes) == 5
    nodes = fake.requests_to("GET", "/api/v1/nodes")
    assert [bool(r.query.get("continue")) for r in nodes] == [False, True, True]
    assert all(r.query["limit"] == "2" for r in nodes)
    (pods,) = fake.requests_to("GET", "/api/v1/pods")
    assert pods.query["fieldSelector"] == "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def test_quota_push_dry_runs_each_object_then_applies_only_changes(ready, fake):
    result = ready.push_quota(build_desired_state(ready.cluster))
    assert result.applied == 0 and result.unchanged > 0
    dry = fake.requests_to("PATCH")
    assert dry and all(r.query == {"fieldManager": "gpu-console", "force": "true", "dryRun": "All"} for r in dry)
    fake.reset_requests()
    Quota.objects.filter(queue__name="train").update(guaranteed=12)
    result = ready.push_quota(build_desired_state(ready.cluster))
    real = [r for r in fake.requests_to("PATCH") if "dryRun" not in r.query]
    assert [r.path for r in real] == ["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-a-train"]
    assert real[0].content_type == APPLY and real[0].query == {"fieldManager": "gpu-console", "force": "true"}
    resources = {r["name"]: r for r in real[0].body["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert resources["nvidia.com/gpu"]["nominalQuota"] == 12 and resources["cpu"]["nominalQuota"] == 96
    assert "update ClusterQueue team-a-train: spec.resourceGroups" in result.messages
    assert result.applied == len(real)


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_every_object_the_backend_sends_is_strictly_valid(db, fake, queueing):
    run_everything(fake, queueing)
    sent = [r.body for r in fake.requests if r.content_type == APPLY]
    kinds = {(o["apiVersion"], o["kind"]) for o in sent}
    expected = {("v1", "Namespace"), ("v1", "ResourceQuota"), ("scheduling.k8s.io/v1", "PriorityClass")}
    expected |= {("v1", "ServiceAccount"), ("rbac.authorization.k8s.io/v1", "Role"), ("apps/v1", "Deployment")}
    expected |= {("rbac.authorization.k8s.io/v1", "RoleBinding")}  # a routed service's router
    expected |= (
        {("batch/v1", "Job"), ("kueue.x-k8s.io/v1beta2", "ClusterQueue"), ("kueue.x-k8s.io/v1beta2", "LocalQueue")}
        if queueing == "kueue"
        else {("batch.volcano.sh/v1alpha1", "Job"), ("scheduling.volcano.sh/v1beta1", "Queue")}
    )
    assert expected <= kinds
    unique = list({(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in sent}.values())
    assert validate_objects(unique) == []
    evictions = [r.body for r in fake.requests if r.path.endswith("/eviction")]
    assert evictions and all(set(e) <= {"apiVersion", "kind", "metadata", "deleteOptions"} for e in evictions)
