"""Warm starts on Kubernetes (docs/inference.md), through the backend over real HTTP against the control-plane model
with image pulls: a pool's pre-pull list becomes a DaemonSet with the quota push (and goes when emptied), a replica
on a node that pre-pulled its image serves at once while one elsewhere waits for the pull, the backend reports each
replica's cold start from its pod conditions, and a service's warm-weights Job is applied with it and cancelled with
it."""

from __future__ import annotations

import pytest

from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.render.prepull import PREPULL_NAMESPACE, daemon_set_name
from apps.backends.render.spec import DEFAULT_IMAGES, InferenceServiceSpec, Warm
from apps.backends.render.workload import RenderContext, render_kubernetes
from apps.backends.types import WorkloadSpec
from apps.fleet.models import NodePool
from apps.fleet.services import sync_inventory
from apps.tenancy.desired_state import build_desired_state
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.conftest import PRODUCT, make_cluster, push_queue

VLLM = DEFAULT_IMAGES["vllm"]
PULL_S = 300
NS = "team-a-serve"


@pytest.fixture
def pulling():
    server = FakeKubernetes(image_pull_s={VLLM: PULL_S}).start()
    yield server
    server.stop()


@pytest.fixture
def cluster(db, pulling):
    """Two pools of one 8-GPU H100 node each: n1 in pool "serve", n2 in pool "batch"."""
    pulling.add_node("n1", gpus=8, labels={"gpu-console/pool": "serve"})
    pulling.add_node("n2", gpus=8, labels={"gpu-console/pool": "batch"})
    cluster = make_cluster(pulling)
    assert sync_inventory(cluster.pk).ok
    return cluster


def _service(name: str, replicas: int, warm: Warm | None = None) -> WorkloadSpec:
    spec = InferenceServiceSpec(
        name=name,
        tenant="team-a",
        queue="serve",
        model="meta-llama/Llama-3.1-8B-Instruct",
        gpu_model="h100",
        tensor_parallel=8,
        replicas=replicas,
        warm=warm,
    )
    ctx = RenderContext(
        namespace=NS,
        queue_name=NS,
        priority_class="online-inference",
        queueing="kueue",
        workload_id=f"id-{name}",
        product_label=PRODUCT,
        name=name,
    )
    return WorkloadSpec(name, "team-a", "serve", manifest=render_kubernetes(spec, ctx))


def test_a_pools_pre_pull_list_is_a_daemon_set_pushed_with_the_quota_and_pruned_when_emptied(cluster, pulling):
    pool = NodePool.objects.get(cluster=cluster, name="serve")
    pool.prepull_images = [VLLM]
    pool.save()
    push_queue(cluster, "team-a", "serve", [NS], h100=16)
    ds = pulling.get("apps", "v1", "daemonsets", daemon_set_name("serve"), PREPULL_NAMESPACE)
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"gpu-console/pool": "serve"}
    assert [c["image"] for c in ds["spec"]["template"]["spec"]["initContainers"]] == [VLLM]
    pods = [p for p in pulling.objects("", "v1", "pods") if p["metadata"]["namespace"] == PREPULL_NAMESPACE]
    assert [p["spec"]["nodeName"] for p in pods] == ["n1"]  # the pool's node only
    pulling.advance(PULL_S)
    images = {n for image in pulling.get("", "v1", "nodes", "n1")["status"]["images"] for n in image["names"]}
    assert VLLM in images
    backend = KubernetesBackend(cluster, sleep=lambda seconds: None)
    assert backend.push_quota(build_desired_state(cluster)).applied == 0  # unchanged
    pool.prepull_images = []
    pool.save()
    pushed = backend.push_quota(build_desired_state(cluster))
    assert f"delete DaemonSet {PREPULL_NAMESPACE}/{daemon_set_name('serve')}" in pushed.messages
    assert pulling.objects("apps", "v1", "daemonsets") == []


def test_a_replica_where_its_image_is_pre_pulled_serves_at_once_and_another_waits_for_the_pull(cluster, pulling):
    pool = NodePool.objects.get(cluster=cluster, name="serve")
    pool.prepull_images = [VLLM]
    pool.save()
    push_queue(cluster, "team-a", "serve", [NS], h100=16)
    pulling.advance(PULL_S)  # the DaemonSet pulled the engine image onto n1
    backend = KubernetesBackend(cluster, sleep=lambda seconds: None)
    backend.submit(_service("chat", replicas=2))
    pulling.tick()
    starts = {s.node: s for s in backend.status(["chat"])["chat"].replica_starts}
    assert set(starts) == {"n1", "n2"}
    assert starts["n1"].ready_at == starts["n1"].scheduled_at  # no pull: ready as it started
    assert starts["n2"].ready_at is None  # still pulling
    pulling.advance(PULL_S)
    starts = {s.node: s for s in backend.status(["chat"])["chat"].replica_starts}
    assert (starts["n2"].ready_at - starts["n2"].scheduled_at).total_seconds() == pytest.approx(PULL_S, abs=2)


def test_the_warm_weights_job_is_applied_with_the_service_and_cancelled_with_it(cluster, pulling):
    push_queue(cluster, "team-a", "serve", [NS], h100=16)
    backend = KubernetesBackend(cluster, sleep=lambda seconds: None)
    submitted = backend.submit(_service("big", replicas=1, warm=Warm(claim="hf-cache")))
    assert submitted.backend_id == "big"  # the Deployment is the workload, not its Job
    job = pulling.get("batch", "v1", "jobs", "big-warm", NS)
    assert job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": "hf-cache"}
    assert "suspend" not in job["spec"]  # no queue label: Kueue leaves it alone
    deployment = pulling.get("apps", "v1", "deployments", "big", NS)
    assert deployment["spec"]["template"]["spec"]["initContainers"][0]["name"] == "wait-for-weights"
    backend.cancel("big")
    pulling.advance(130)
    assert pulling.get("batch", "v1", "jobs", "big-warm", NS) is None
    assert pulling.get("apps", "v1", "deployments", "big", NS) is None
