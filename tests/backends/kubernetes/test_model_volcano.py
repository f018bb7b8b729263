"""The control-plane model's Volcano, against Volcano's documented behaviour (cited in
tests/backends/k8s_fake/volcano.py): admission webhooks, queue capability (hierarchical), gang scheduling with
minAvailable, network topology over HyperNodes, and volcano pods outside a Job."""

from __future__ import annotations

import pytest

from tests.backends.k8s_fake.store import ApiError
from tests.backends.kubernetes.model import condition, create, events, pod_template, pods

NS = "team-a"


def queue(name: str, parent: str = "", capability: dict | None = None, state: str = "") -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {**({"parent": parent} if parent else {}), **({"capability": capability} if capability else {})},
        **({"status": {"state": state}} if state else {}),
    }


def vcjob(name: str, replicas: int, gpus: int, queue_name: str = "train", min_available: int | None = None, **spec):
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "queue": queue_name,
            **({"minAvailable": min_available} if min_available else {}),
            "tasks": [{"name": "worker", "replicas": replicas, "template": pod_template(gpus)}],
            **spec,
        },
    }


@pytest.fixture
def volcano(fake):
    fake.add_namespace(NS)
    for i in range(4):
        fake.add_node(f"n{i}", gpus=8, labels={"net/leaf": "a" if i < 2 else "b"})
    create(fake, queue("org"))
    create(fake, queue("train", parent="org"))
    return fake


def pod_group(fake, job_name: str) -> dict:
    (pg,) = [
        p
        for p in fake.objects("scheduling.volcano.sh", "v1beta1", "podgroups")
        if p["metadata"]["ownerReferences"][0]["name"] == job_name
    ]
    return pg


def phase(fake, name: str) -> str:
    return fake.get("batch.volcano.sh", "v1alpha1", "jobs", name, NS)["status"]["state"]["phase"]


def test_a_job_runs_as_a_gang_and_completes(volcano):
    create(volcano, vcjob("train-1", 2, 8))
    job = volcano.get("batch.volcano.sh", "v1alpha1", "jobs", "train-1", NS)
    assert job["spec"]["schedulerName"] == "volcano" and job["spec"]["minAvailable"] == 2
    placed = pods(volcano, NS, "train-1")
    assert [p["metadata"]["name"] for p in placed] == ["train-1-worker-0", "train-1-worker-1"]
    assert {p["spec"]["nodeName"] for p in placed} == {"n0", "n1"}
    assert (
        placed[0]["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        == pod_group(volcano, "train-1")["metadata"]["name"]
    )
    assert phase(volcano, "train-1") == "Running" and pod_group(volcano, "train-1")["status"]["phase"] == "Running"
    volcano.advance(61)
    assert phase(volcano, "train-1") == "Completed"


def test_the_webhook_refuses_a_missing_closed_or_non_leaf_queue(volcano):
    with pytest.raises(ApiError) as missing:
        create(volcano, vcjob("j", 1, 1, queue_name="nope"))
    assert missing.value.code == 400 and missing.value.message == (
        'admission webhook "validatejob.volcano.sh" denied the request:  unable to find job queue: '
        'queues.scheduling.volcano.sh "nope" not found;'
    )
    with pytest.raises(ApiError) as parent:
        create(volcano, vcjob("j", 1, 1, queue_name="org"))
    assert "can only submit job to leaf queue, queue `org` has 1 child queues;" in parent.value.message
    create(volcano, queue("closed", state="Closed"))
    with pytest.raises(ApiError) as closed:
        create(volcano, vcjob("j", 1, 1, queue_name="closed"))
    assert "can only submit job to queue with state `Open`, queue `closed` status is `Closed`;" in closed.value.message
    assert volcano.get("batch.volcano.sh", "v1alpha1", "jobs", "j", NS) is None


def test_a_queue_s_capability_holds_the_job_before_any_pod_exists(volcano):
    create(volcano, queue("small", parent="org", capability={"nvidia.com/gpu": 8}))
    create(volcano, vcjob("big", 2, 8, queue_name="small"))
    assert pods(volcano, NS, "big") == []
    assert pod_group(volcano, "big")["status"]["phase"] == "Pending"
    assert "Unschedulable: queue resource quota insufficient: insufficient nvidia.com/gpu" in events(
        volcano, pod_group(volcano, "big")["metadata"]["name"]
    )


def test_a_parent_queue_s_capability_caps_its_children(volcano):
    create(volcano, queue("capped", capability={"nvidia.com/gpu": 8}))
    create(volcano, queue("child-1", parent="capped"))
    create(volcano, queue("child-2", parent="capped"))
    create(volcano, vcjob("one", 1, 8, queue_name="child-1"))
    create(volcano, vcjob("two", 1, 8, queue_name="child-2"))
    assert phase(volcano, "one") == "Running"
    assert pod_group(volcano, "two")["status"]["phase"] == "Pending"


def test_a_gang_that_does_not_fit_binds_nothing(volcano):
    create(volcano, vcjob("gang", 5, 8))  # four nodes of eight GPUs
    placed = pods(volcano, NS, "gang")
    assert len(placed) == 5 and not any(p["spec"].get("nodeName") for p in placed)
    pg = pod_group(volcano, "gang")
    assert condition(pg, "Unschedulable")["message"] == (
        "5/5 tasks in gang unschedulable: pod group is not ready, 5 Pending, 5 minAvailable; "
        "Pending: 1 Unschedulable, 4 Schedulable."
    )
    assert (
        condition(placed[4], "PodScheduled")["message"] == "0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu."
    )
    assert phase(volcano, "gang") == "Pending"


def test_an_elastic_gang_runs_with_its_minimum(volcano):
    create(volcano, vcjob("busy", 2, 8))
    create(volcano, vcjob("elastic", 4, 8, min_available=2))
    placed = pods(volcano, NS, "elastic")
    assert sum(1 for p in placed if p["spec"].get("nodeName")) == 2
    assert phase(volcano, "elastic") == "Running"


def test_hard_network_topology_keeps_the_job_in_one_hypernode(volcano):
    volcano.add_hypernode("leaf-a", 1, nodes=["n0", "n1"])
    volcano.add_hypernode("leaf-b", 1, nodes=["n2", "n3"])
    volcano.add_hypernode("spine", 2, hypernodes=["leaf-a", "leaf-b"])
    tier1 = {"mode": "hard", "highestTierAllowed": 1}
    create(volcano, vcjob("leafy", 2, 8, networkTopology=tier1))
    assert {p["spec"]["nodeName"] for p in pods(volcano, NS, "leafy")} == {"n0", "n1"}
    create(volcano, vcjob("wide", 3, 4, networkTopology=tier1))  # fits in leaf b (2 nodes x 8 GPUs)
    assert {p["spec"]["nodeName"] for p in pods(volcano, NS, "wide")} <= {"n2", "n3"}
    create(volcano, vcjob("too-wide", 2, 8, networkTopology=tier1))
    assert not any(p["spec"].get("nodeName") for p in pods(volcano, NS, "too-wide"))
    create(volcano, vcjob("spine", 1, 4, networkTopology={"mode": "hard", "highestTierAllowed": 2}))
    assert all(p["spec"].get("nodeName") for p in pods(volcano, NS, "spine"))


def test_without_hypernodes_a_hard_topology_cannot_be_met(volcano):
    create(volcano, vcjob("nowhere", 1, 1, networkTopology={"mode": "hard", "highestTierAllowed": 1}))
    assert not any(p["spec"].get("nodeName") for p in pods(volcano, NS, "nowhere"))


def test_volcano_pods_outside_a_job_are_a_gang_of_one_in_their_queue(volcano):
    template = pod_template(4, schedulerName="volcano")
    template["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "train"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "namespace": NS},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template},
    }
    create(volcano, deployment)
    placed = pods(volcano, NS, "chat")
    assert len(placed) == 2 and all(p["spec"].get("nodeName") for p in placed)
    groups = [
        g
        for g in volcano.objects("scheduling.volcano.sh", "v1beta1", "podgroups")
        if g["metadata"]["name"].startswith("podgroup-")
    ]
    assert len(groups) == 2 and all(g["spec"]["minMember"] == 1 and g["spec"]["queue"] == "train" for g in groups)


def test_a_volcano_pod_in_a_missing_queue_is_refused(volcano):
    template = pod_template(1, schedulerName="volcano")
    template["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "nope"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "lost", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": template},
    }
    create(volcano, deployment)
    assert pods(volcano, NS, "lost") == []
    assert any(
        'admission webhook "validatepod.volcano.sh" denied the request:  unable to find job queue' in e
        for e in events(volcano, "lost")
    )


def test_volcano_installs_the_root_and_default_queues(volcano):
    assert {q["metadata"]["name"] for q in volcano.objects("scheduling.volcano.sh", "v1beta1", "queues")} >= {
        "root",
        "default",
    }
    create(volcano, vcjob("anywhere", 1, 1, queue_name="default"))
    assert phase(volcano, "anywhere") == "Running"


RESTART_JOB = [{"event": "PodFailed", "action": "RestartJob"}]


def test_max_retry_zero_is_defaulted_to_three_by_the_webhook(volcano):
    create(volcano, vcjob("j", 1, 1, maxRetry=0))
    assert volcano.get("batch.volcano.sh", "v1alpha1", "jobs", "j", NS)["spec"]["maxRetry"] == 3


def test_without_a_policy_a_failed_pod_fails_the_job(volcano):
    create(volcano, vcjob("j", 1, 8))
    volcano.crash(NS, "j-worker-0")
    assert phase(volcano, "j") == "Failed"
    assert [p["status"]["phase"] for p in pods(volcano, NS, "j")] == ["Failed"]


def test_restart_job_runs_the_job_again_until_max_retry(volcano):
    create(volcano, vcjob("j", 2, 8, maxRetry=2, policies=RESTART_JOB))
    first = {p["metadata"]["uid"] for p in pods(volcano, NS, "j")}
    volcano.crash(NS, "j-worker-0")
    # Every pod is killed (the running one terminates for its grace period) before the gang starts again.
    assert phase(volcano, "j") == "Restarting"
    volcano.advance(31)
    job = volcano.get("batch.volcano.sh", "v1alpha1", "jobs", "j", NS)
    # Every pod was created anew (a gang restarts whole); one retry counted.
    assert job["status"]["retryCount"] == 1 and job["status"]["state"]["phase"] == "Running"
    again = pods(volcano, NS, "j")
    assert {p["status"]["phase"] for p in again} == {"Running"} and not first & {p["metadata"]["uid"] for p in again}
    volcano.crash(NS, "j-worker-1")
    job = volcano.get("batch.volcano.sh", "v1alpha1", "jobs", "j", NS)
    assert job["status"]["retryCount"] == 2 and job["status"]["state"]["phase"] == "Failed"


def test_a_pod_past_its_active_deadline_restarts_the_job_under_restart_job(volcano):
    """The kubelet fails a pod past activeDeadlineSeconds (reason DeadlineExceeded); RestartJob then runs the job
    again with new pods, whose deadlines count from their own start: the deadline alone does not end the Job."""
    job = vcjob("j", 1, 8, maxRetry=3, policies=RESTART_JOB)
    job["spec"]["tasks"][0]["template"] = pod_template(8, activeDeadlineSeconds=30)
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"] = ["sleep", "600"]
    create(volcano, job)
    volcano.advance(31)
    status = volcano.get("batch.volcano.sh", "v1alpha1", "jobs", "j", NS)["status"]
    assert status["retryCount"] == 1 and status["state"]["phase"] == "Running"
    volcano.advance(31)
    volcano.advance(31)
    assert phase(volcano, "j") == "Failed"  # the third deadline reaches maxRetry


def test_restart_pod_replaces_only_the_failed_pod(volcano):
    create(volcano, vcjob("j", 2, 8, policies=[{"events": ["PodFailed"], "action": "RestartPod"}]))
    (kept,) = [p["metadata"]["uid"] for p in pods(volcano, NS, "j") if p["metadata"]["name"] == "j-worker-1"]
    volcano.crash(NS, "j-worker-0")
    now = {p["metadata"]["name"]: p for p in pods(volcano, NS, "j")}
    assert now["j-worker-1"]["metadata"]["uid"] == kept
    assert now["j-worker-0"]["status"]["phase"] == "Running" and phase(volcano, "j") == "Running"


def test_abort_job_ends_the_job_aborted(volcano):
    create(volcano, vcjob("j", 2, 8, policies=[{"event": "*", "action": "AbortJob"}]))
    volcano.crash(NS, "j-worker-0")
    assert phase(volcano, "j") == "Aborted"
