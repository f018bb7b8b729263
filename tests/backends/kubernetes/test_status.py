"""Status mapping from each workload kind and its pods into the console's states, with events surfaced."""

from __future__ import annotations

import pytest

from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.kubernetes.workloads import workload_status
from apps.backends.render.workload import RenderContext, render_kubernetes
from apps.backends.types import BackendState, WorkloadSpec
from apps.workloads.specs import InferenceServiceSpec
from tests.backends.console_specs import console_spec
from tests.backends.kubernetes.conftest import make_cluster, push_queue, seed_nodes

T = "2026-11-30T10:00:00Z"


def job(status=None, spec=None, **meta):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "n", **meta},
        "spec": spec or {"suspend": False},
        "status": status or {},
    }


def pod(phase="Running", node="gpu-01", conditions=None):
    return {
        "metadata": {"name": "j-0-x", "namespace": "n"},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "startTime": T, "conditions": conditions or []},
    }


def test_batch_job_states():
    assert workload_status("j", job(spec={"suspend": True}), [], []).state == BackendState.PENDING
    assert "Kueue" in workload_status("j", job(spec={"suspend": True}), [], []).reason
    running = workload_status("j", job(), [pod()], [])
    assert running.state == BackendState.RUNNING and running.placements[0].node == "gpu-01"
    done = job({"conditions": [{"type": "Complete", "status": "True"}], "completionTime": T})
    assert workload_status("j", done, [], []).finished_at.isoformat() == "2026-11-30T10:00:00+00:00"
    failed = job(
        {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ]
        }
    )
    status = workload_status("j", failed, [], [])
    assert (
        status.state == BackendState.FAILED
        and status.reason == "BackoffLimitExceeded: Job has reached the specified backoff limit"
    )
    deleting = workload_status("j", job(deletionTimestamp=T), [pod()], [])
    assert deleting.state == BackendState.CANCELLED


def test_pending_reason_comes_from_the_scheduler():
    unschedulable = pod(
        node="",
        phase="Pending",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            }
        ],
    )
    status = workload_status("j", job(), [unschedulable], ["FailedScheduling: 0/4 nodes are available"])
    assert status.state == BackendState.PENDING and status.reason.startswith("0/4 nodes are available")
    assert status.events == ["FailedScheduling: 0/4 nodes are available"]


@pytest.mark.parametrize(
    ("phase", "state"),
    [
        ("Pending", BackendState.PENDING),
        ("Inqueue", BackendState.PENDING),
        ("Restarting", BackendState.PENDING),
        ("Running", BackendState.RUNNING),
        ("Completed", BackendState.SUCCEEDED),
        ("Failed", BackendState.FAILED),
        ("Terminated", BackendState.FAILED),
        ("Aborted", BackendState.CANCELLED),
    ],
)
def test_volcano_job_phases(phase, state):
    obj = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "v"},
        "spec": {},
        "status": {"state": {"phase": phase, "lastTransitionTime": T}},
    }
    assert workload_status("v", obj, [], []).state == state


def test_services_run_while_a_replica_serves():
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"replicas": 3},
        "status": {"availableReplicas": 1},
    }
    status = workload_status("d", deploy, [], [])
    assert status.state == BackendState.RUNNING and status.reason == "1 of 3 replicas ready"
    deploy["status"] = {}
    assert workload_status("d", deploy, [], []).state == BackendState.PENDING
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "l"},
        "spec": {"replicas": 1},
        "status": {"readyReplicas": 1},
    }
    assert workload_status("l", lws, [], []).state == BackendState.RUNNING


def test_a_job_that_cannot_fit_is_pending_with_the_scheduler_s_event(db, fake):
    seed_nodes(fake, count=2, gpus=4)
    cluster = make_cluster(fake)
    push_queue(cluster, "team-a", "train", ["team-a"], h100=8)
    backend = KubernetesBackend(cluster)
    spec = console_spec("big", gpus_per_worker=8, command=["sleep", "60"])
    backend.submit(spec)
    fake.advance(1)
    status = backend.status(["big"])["big"]
    message = (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert status.state == BackendState.PENDING
    assert status.reason == message
    assert status.events == [f"FailedScheduling: {message}"]


def service(name: str, **fields) -> InferenceServiceSpec:
    return InferenceServiceSpec(
        name=name, tenant="team-a", queue="serve", model="meta-llama/Llama-3.1-8B-Instruct", gpu_model="h100", **fields
    )


@pytest.mark.parametrize(("tp", "kind"), [(1, "Deployment"), (16, "LeaderWorkerSet")])
def test_inference_services_from_their_rendered_manifest(db, fake, tp, kind):
    seed_nodes(fake, count=2, gpus=8)
    cluster = make_cluster(fake)
    push_queue(cluster, "team-a", "serve", ["team-a-serve"], h100=16)
    fake.reset_requests()
    ctx = RenderContext(
        namespace="team-a-serve",
        queue_name="team-a-serve",
        priority_class="online-inference",
        queueing="kueue",
        workload_id="41",
        product_label="NVIDIA-H100-80GB-HBM3",
        name="wl41-chat",
    )
    rendered = render_kubernetes(service("chat", tensor_parallel=tp), ctx)
    backend = KubernetesBackend(cluster)
    result = backend.submit(WorkloadSpec("wl41-chat", "team-a", "serve", manifest=rendered))
    assert result.backend_id == "wl41-chat"
    assert fake.requests_to("PATCH")[0].body["kind"] == kind
    fake.advance(1)
    status = backend.status(["wl41-chat"])["wl41-chat"]
    assert status.state == BackendState.RUNNING
    assert {p.node for p in status.placements} == ({"gpu-01"} if tp == 1 else {"gpu-01", "gpu-02"})
    backend.cancel("wl41-chat")
    deleted = {(r.path.rsplit("/", 2)[-2], r.body["propagationPolicy"]) for r in fake.requests_to("DELETE")}
    assert ("services", "Background") in deleted and (kind.lower() + "s", "Foreground") in deleted
    fake.advance(200)
    assert backend.status(["wl41-chat"])["wl41-chat"].state == BackendState.CANCELLED
    assert fake.objects("", "v1", "pods") == []


def test_a_job_kueue_has_not_admitted_says_why_in_kueue_s_words(db, fake):
    """Kueue keeps its reason on its Workload (QuotaReserved=False), not on the Job: the console reads it there.

    https://kueue.sigs.k8s.io/docs/concepts/workload/ : a LocalQueue deleted by hand leaves the Job suspended.
    """
    seed_nodes(fake, count=2, gpus=4)
    cluster = make_cluster(fake)
    push_queue(cluster, "team-a", "train", ["team-a"], h100=8)
    for local_queue in fake.objects("kueue.x-k8s.io", "v1beta2", "localqueues"):
        fake.store.remove(
            fake.resource("kueue.x-k8s.io", "v1beta2", "localqueues"),
            local_queue["metadata"]["namespace"],
            local_queue["metadata"]["name"],
        )
    backend = KubernetesBackend(cluster)
    backend.submit(console_spec("waits", gpus_per_worker=1, command=["sleep", "60"]))
    fake.advance(1)

    status = backend.status(["waits"])["waits"]

    assert status.state == BackendState.PENDING
    assert status.reason == "suspended until Kueue admits it (LocalQueue team-a-train doesn't exist)"


def test_a_gated_service_says_why_kueue_holds_it():
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1}}
    gated = {"metadata": {"name": "d-1"}, "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}
    message = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100"
    status = workload_status("d", deploy, [gated], [], message)
    assert status.state == BackendState.PENDING and status.reason == f"waiting for Kueue to admit it ({message})"
