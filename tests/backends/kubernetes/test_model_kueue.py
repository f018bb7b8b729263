"""The control-plane model's Kueue, against Kueue's documented behaviour and messages (cited in
tests/backends/k8s_fake/kueue.py and kueue_quota.py): admission through a LocalQueue of the workload's namespace
into a ClusterQueue that covers every requested resource, flavor matching, quota, cohorts, priority, preemption,
injection on admission, and the reasons a Workload stays pending."""

from __future__ import annotations

import pytest

from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.k8s_fake.kueue import KueueConfig
from tests.backends.kubernetes.model import (
    cluster_queue,
    condition,
    create,
    flavor,
    job,
    local_queue,
    pod_template,
    pods,
    workload_of,
)

NS = "team-a"
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
QUEUE = "kueue.x-k8s.io/queue-name"


@pytest.fixture
def kueue(fake):
    fake.add_namespace(NS)
    for i in range(2):
        fake.add_node(f"h100-{i}", gpus=8, cpu="64", memory="512Gi")
    fake.add_node("a100-0", gpus=8, product="NVIDIA-A100-SXM4-80GB", cpu="64", memory="512Gi")
    return fake


def standard(fake, gpus=8, cq="team-a", lq="train", **spec):
    create(fake, flavor("h100", H100))
    create(fake, cluster_queue(cq, {"h100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": gpus}}, **spec))
    create(fake, local_queue(lq, NS, cq))


def queued(name: str, gpus: int = 1, queue: str = "train", **kw) -> dict:
    return job(name, NS, gpus, labels={QUEUE: queue, **kw.pop("labels", {})}, **kw)


def reserved(fake, name: str) -> dict:
    return condition(workload_of(fake, name, NS), "QuotaReserved")


def test_a_queued_job_is_suspended_by_the_webhook_and_waits_for_its_local_queue(kueue):
    create(kueue, queued("j"))
    assert kueue.get("batch", "v1", "jobs", "j", NS)["spec"]["suspend"] is True
    assert pods(kueue, NS) == []
    assert reserved(kueue, "j") | {"lastTransitionTime": ""} == {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Inadmissible",
        "message": "LocalQueue train doesn't exist",
        "lastTransitionTime": "",
    }
    create(kueue, local_queue("train", NS, "team-a"))
    kueue.advance(1)
    assert reserved(kueue, "j")["message"] == "ClusterQueue team-a doesn't exist"
    standard(kueue, lq="other")
    kueue.advance(1)
    assert reserved(kueue, "j")["status"] == "True"
    assert kueue.get("batch", "v1", "jobs", "j", NS)["spec"]["suspend"] is False


def test_the_label_names_a_local_queue_not_a_cluster_queue(kueue):
    standard(kueue)
    create(kueue, queued("j", queue="team-a"))
    assert reserved(kueue, "j")["message"] == "LocalQueue team-a doesn't exist"


def test_a_cluster_queue_without_a_namespace_selector_admits_no_namespace(kueue):
    standard(kueue)
    kueue_cq = kueue.get("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a")
    del kueue_cq["spec"]["namespaceSelector"]
    with kueue.lock:
        kueue.store.bucket(kueue.resource("kueue.x-k8s.io", "v1beta2", "clusterqueues"))[("", "team-a")] = kueue_cq
    create(kueue, queued("j"))
    assert reserved(kueue, "j") | {"lastTransitionTime": ""} == {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "Workload namespace doesn't match ClusterQueue selector",
        "lastTransitionTime": "",
    }


def test_every_requested_resource_must_be_covered(kueue):
    create(kueue, flavor("h100", H100))
    create(kueue, cluster_queue("team-a", {"h100": {"nvidia.com/gpu": 16}}))
    create(kueue, local_queue("train", NS, "team-a"))
    create(kueue, queued("j", 8))
    assert (
        reserved(kueue, "j")["message"]
        == "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue"
    )


def test_excluded_resource_prefixes_leave_cpu_and_memory_out_of_quota(db):
    fake = FakeKubernetes(kueue=KueueConfig(exclude_resource_prefixes=("cpu", "memory"))).start()
    try:
        fake.add_namespace(NS)
        fake.add_node("h100-0", gpus=8)
        create(fake, flavor("h100", H100))
        create(fake, cluster_queue("team-a", {"h100": {"nvidia.com/gpu": 16}}))
        create(fake, local_queue("train", NS, "team-a"))
        create(fake, queued("j", 8))
        assert reserved(fake, "j")["status"] == "True"
        assert pods(fake, NS)[0]["spec"]["nodeName"] == "h100-0"
    finally:
        fake.stop()


def test_quota_is_counted_and_released_when_the_job_finishes(kueue):
    standard(kueue, gpus=8)
    create(kueue, queued("first", 8))
    create(kueue, queued("second", 4))
    assert reserved(kueue, "first")["status"] == "True"
    assert reserved(kueue, "second")["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "4 more needed"
    )
    cq = kueue.get("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a")
    assert cq["status"]["pendingWorkloads"] == 1 and cq["status"]["reservingWorkloads"] == 1
    kueue.advance(61)
    assert condition(workload_of(kueue, "first", NS), "Finished")["status"] == "True"
    assert reserved(kueue, "second")["status"] == "True"


def test_partial_admission_down_to_the_job_s_minimum(kueue):
    standard(kueue, gpus=16)
    create(kueue, queued("busy", 8))
    elastic = queued("elastic", 4, parallelism=4)
    elastic["metadata"]["annotations"] = {
        "kueue.x-k8s.io/job-min-parallelism": "2",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
    }
    create(kueue, elastic)
    job = kueue.get("batch", "v1", "jobs", "elastic", NS)
    assert (job["spec"]["parallelism"], job["spec"]["completions"], job["spec"]["suspend"]) == (2, 2, False)
    assert workload_of(kueue, "elastic", NS)["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    assert len(pods(kueue, NS, "elastic")) == 2
    create(kueue, queued("rigid", 4, parallelism=4))  # no minimum: all four or nothing
    assert reserved(kueue, "rigid")["status"] == "False"


def test_a_request_above_everything_the_queue_could_get(kueue):
    standard(kueue, gpus=8)
    create(kueue, queued("huge", 8, parallelism=2))
    assert reserved(kueue, "huge")["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, "
        "request > maximum capacity (16 > 8)"
    )


def test_admission_injects_the_flavor_and_its_tolerations(kueue):
    taint = {"key": "pool", "value": "h100", "effect": "NoSchedule"}
    for node in ("h100-0", "h100-1"):
        live = kueue.get("", "v1", "nodes", node)
        live["spec"]["taints"] = [taint]
        with kueue.lock:
            kueue.store.bucket(kueue.resource("", "v1", "nodes"))[("", node)] = live
    create(
        kueue,
        flavor(
            "h100", H100, tolerations=[{"key": "pool", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]
        ),
    )
    create(kueue, cluster_queue("team-a", {"h100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 16}}))
    create(kueue, local_queue("train", NS, "team-a"))
    create(kueue, queued("j", 8, parallelism=2))
    template = kueue.get("batch", "v1", "jobs", "j", NS)["spec"]["template"]["spec"]
    assert template["nodeSelector"] == H100
    assert template["tolerations"] == [{"key": "pool", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]
    assert sorted(p["spec"]["nodeName"] for p in pods(kueue, NS)) == ["h100-0", "h100-1"]
    admission = workload_of(kueue, "j", NS)["status"]["admission"]
    assert admission["clusterQueue"] == "team-a"
    assert admission["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "h100"
    assert admission["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"] == "16"


def test_an_admitted_job_suspended_from_outside_is_started_again(kueue):
    standard(kueue)
    create(kueue, queued("j", 1))
    path = f"/apis/batch/v1/namespaces/{NS}/jobs/j"
    kueue.handle("PATCH", path, {}, {"content-type": "application/merge-patch+json"}, {"spec": {"suspend": True}})
    assert kueue.get("batch", "v1", "jobs", "j", NS)["spec"]["suspend"] is False
    assert reserved(kueue, "j")["status"] == "True"


def test_a_flavor_must_match_the_pod_s_node_selector(kueue):
    standard(kueue)
    create(kueue, queued("j", 1, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}))
    assert (
        reserved(kueue, "j")["message"]
        == "couldn't assign flavors to pod set main: flavor h100 doesn't match node affinity"
    )


def test_flavor_taints_must_be_tolerated_by_the_pods(kueue):
    create(kueue, flavor("spot", H100, nodeTaints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}]))
    create(kueue, cluster_queue("team-a", {"spot": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 16}}))
    create(kueue, local_queue("train", NS, "team-a"))
    create(kueue, queued("j"))
    assert reserved(kueue, "j")["message"] == (
        "couldn't assign flavors to pod set main: untolerated taint {spot true NoSchedule <nil>} in flavor spot"
    )


def test_flavors_are_tried_in_order(kueue):
    create(kueue, flavor("h100", H100))
    create(kueue, flavor("a100", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}))
    quotas = {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 8}
    create(kueue, cluster_queue("team-a", {"h100": quotas, "a100": quotas}))
    create(kueue, local_queue("train", NS, "team-a"))
    create(kueue, queued("one", 8))
    create(kueue, queued("two", 8))
    flavors = [
        workload_of(kueue, n, NS)["status"]["admission"]["podSetAssignments"][0]["flavors"] for n in ("one", "two")
    ]
    assert [f["nvidia.com/gpu"] for f in flavors] == ["h100", "a100"]
    assert pods(kueue, NS, "two")[0]["spec"]["nodeName"] == "a100-0"


def cohort_queue(name: str, gpus: int, **limits) -> dict:
    return cluster_queue(
        name,
        {"h100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": {"nominalQuota": gpus, **limits}}},
        cohortName="org",
    )


def test_borrowing_within_a_cohort_up_to_the_borrowing_limit(kueue):
    kueue.add_namespace("team-b")
    create(kueue, flavor("h100", H100))
    create(kueue, cohort_queue("team-a", 4, borrowingLimit=4))
    create(kueue, cohort_queue("team-b", 8))
    create(kueue, local_queue("train", NS, "team-a"))
    create(kueue, queued("borrows", 8))  # 4 own + 4 borrowed from team-b's idle quota
    assert reserved(kueue, "borrows")["status"] == "True"
    create(kueue, queued("over", 1))
    # Its maximum is 8 (nominal 4 + borrowing limit 4), all in use: it waits for quota to free up.
    assert reserved(kueue, "over")["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "1 more needed"
    )


def test_a_lending_limit_keeps_part_of_the_quota_for_its_owner(kueue):
    create(kueue, flavor("h100", H100))
    create(kueue, cohort_queue("team-a", 0))
    create(kueue, cohort_queue("team-b", 12, lendingLimit=4))
    create(kueue, local_queue("train", NS, "team-a"))
    create(kueue, queued("lent", 4))
    assert reserved(kueue, "lent")["status"] == "True"
    create(kueue, queued("more", 1))
    assert reserved(kueue, "more")["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "1 more needed"
    )


def test_a_parent_cohort_s_quota_is_shared_by_the_tree(kueue):
    create(kueue, flavor("h100", H100))
    create(
        kueue,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": "root"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "h100",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 64},
                                    {"name": "memory", "nominalQuota": "512Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": 8},
                                ],
                            }
                        ],
                    }
                ]
            },
        },
    )
    create(
        kueue,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": "org"},
            "spec": {"parentName": "root"},
        },
    )
    create(kueue, cohort_queue("team-a", 0))
    create(kueue, local_queue("train", NS, "team-a"))
    create(kueue, queued("shared", 8))
    assert reserved(kueue, "shared")["status"] == "True"


def wpc(name: str, value: int) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def test_priority_orders_the_queue(kueue):
    standard(kueue, gpus=8)
    create(kueue, wpc("low", 100))
    create(kueue, wpc("high", 1000))
    create(kueue, queued("running", 8))
    create(kueue, queued("low", 8, labels={"kueue.x-k8s.io/priority-class": "low"}))
    create(kueue, queued("high", 8, labels={"kueue.x-k8s.io/priority-class": "high"}))
    assert workload_of(kueue, "high", NS)["spec"]["priority"] == 1000
    kueue.advance(61)
    assert reserved(kueue, "high")["status"] == "True"
    assert reserved(kueue, "low")["status"] == "False"


def test_a_missing_workload_priority_class_means_no_workload(kueue):
    standard(kueue)
    create(kueue, queued("j", labels={"kueue.x-k8s.io/priority-class": "nope"}))
    assert workload_of(kueue, "j", NS) is None
    assert kueue.get("batch", "v1", "jobs", "j", NS)["spec"]["suspend"] is True


def test_preemption_within_the_cluster_queue_evicts_lower_priority(kueue):
    standard(kueue, gpus=8, preemption={"withinClusterQueue": "LowerPriority"})
    create(kueue, wpc("low", 100))
    create(kueue, wpc("high", 1000))
    create(kueue, queued("low", 8, labels={"kueue.x-k8s.io/priority-class": "low"}))
    assert pods(kueue, NS, "low")[0]["spec"]["nodeName"]
    create(kueue, queued("high", 8, labels={"kueue.x-k8s.io/priority-class": "high"}))
    low = workload_of(kueue, "low", NS)
    assert condition(low, "Evicted")["reason"] == "Preempted"
    assert "due to prioritization in the ClusterQueue" in condition(low, "Evicted")["message"]
    job_low = kueue.get("batch", "v1", "jobs", "low", NS)
    assert job_low["spec"]["suspend"] is True and "nodeSelector" not in job_low["spec"]["template"]["spec"]
    assert reserved(kueue, "high")["status"] == "True"
    kueue.advance(31)  # the preempted pod's grace period
    assert pods(kueue, NS, "high")[0]["spec"]["nodeName"]


def test_without_a_preemption_policy_nothing_is_evicted(kueue):
    standard(kueue, gpus=8)
    create(kueue, wpc("high", 1000))
    create(kueue, queued("low", 8))
    create(kueue, queued("high", 8, labels={"kueue.x-k8s.io/priority-class": "high"}))
    assert reserved(kueue, "low")["status"] == "True" and reserved(kueue, "high")["status"] == "False"


def deployment(name: str, replicas: int, gpus: int, queue: str = "serve") -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "labels": {QUEUE: queue}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(gpus, labels={"app": name}),
        },
    }


def test_deployment_pods_are_gated_and_admitted_one_by_one(kueue):
    standard(kueue, gpus=8, lq="serve")
    create(kueue, deployment("chat", 3, 4))
    placed = pods(kueue, NS, "chat")
    assert len(placed) == 3
    gated = [p for p in placed if p["spec"].get("schedulingGates")]
    assert len(gated) == 1 and gated[0]["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert all(p["metadata"]["labels"][QUEUE] == "serve" for p in placed)
    running = [p for p in placed if not p["spec"].get("schedulingGates")]
    assert all(p["spec"]["nodeSelector"] == H100 and p["spec"].get("nodeName") for p in running)
    assert kueue.get("apps", "v1", "deployments", "chat", NS)["status"]["readyReplicas"] == 2


def lws(name: str, size: int, gpus: int, queue: str = "serve") -> dict:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": NS, "labels": {QUEUE: queue}},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size, "workerTemplate": pod_template(gpus)}},
    }


def test_a_leader_worker_set_group_is_admitted_all_or_nothing(kueue):
    standard(kueue, gpus=8, lq="serve")
    create(kueue, lws("big", 3, 4))  # 12 GPUs for one group, 8 in quota
    assert all(p["spec"].get("schedulingGates") for p in pods(kueue, NS, "big"))
    assert "insufficient quota for nvidia.com/gpu in flavor h100" in reserved(kueue, "big")["message"]
    create(kueue, lws("small", 2, 4))
    assert reserved(kueue, "small")["status"] == "True"
    path = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{NS}/leaderworkersets/big"
    kueue.handle("PATCH", path, {}, {"content-type": "application/merge-patch+json"}, {"spec": {"replicas": 0}})
    assert workload_of(kueue, "big", NS) is None and pods(kueue, NS, "big") == []
    assert all(p["spec"].get("nodeName") for p in pods(kueue, NS, "small"))


def test_a_cluster_queue_naming_a_missing_flavor_is_inactive(kueue):
    create(kueue, cluster_queue("team-a", {"h100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 8}}))
    create(kueue, local_queue("train", NS, "team-a"))
    create(kueue, queued("j"))
    assert reserved(kueue, "j")["message"] == "ClusterQueue team-a is inactive"
    cq = kueue.get("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a")
    assert condition(cq, "Active")["reason"] == "FlavorNotFound"
