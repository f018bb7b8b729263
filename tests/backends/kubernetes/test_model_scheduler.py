"""The control-plane model's kube-scheduler, device plugins and pod admission, each against the documented
behaviour (the pages are cited in tests/backends/k8s_fake/scheduler.py, hami.py and admission.py)."""

from __future__ import annotations

import pytest

from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.k8s_fake.store import ApiError
from tests.backends.kubernetes.model import condition, create, events, job, pods

NS = "team-a"


@pytest.fixture
def plain(fake):
    fake.add_namespace(NS)
    return fake


def scheduled(fake, name: str) -> dict:
    (pod,) = pods(fake, NS, name)
    return pod


def test_requests_count_cpu_memory_and_every_extended_resource(plain):
    plain.add_node("gpu-01", gpus=8, cpu="16", memory="64Gi")
    create(plain, job("fits", NS, 8, resources={"cpu": "12", "memory": "32Gi"}))
    assert scheduled(plain, "fits")["spec"]["nodeName"] == "gpu-01"
    create(plain, job("no-cpu", NS, 0, resources={"cpu": "8", "memory": "1Gi"}))
    pod = scheduled(plain, "no-cpu")
    assert "nodeName" not in pod["spec"]
    assert condition(pod, "PodScheduled")["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    create(plain, job("two-short", NS, 1, resources={"cpu": "8", "memory": "40Gi"}))
    assert condition(scheduled(plain, "two-short"), "PodScheduled")["message"].startswith(
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Insufficient nvidia.com/gpu."
    )
    assert events(plain, scheduled(plain, "no-cpu")["metadata"]["name"])[0].startswith(
        "FailedScheduling: 0/1 nodes are available: 1 Insufficient cpu."
    )


def test_an_rdma_device_plugins_resource_is_counted_per_node_like_any_extended_resource(plain):
    """A pod requesting rdma/ib (the k8s-rdma-shared-dev-plugin's resource) lands only on a node advertising it, and
    waits with NodeResourcesFit's reason where no node has it free."""
    plain.add_node("eth-01", gpus=8)
    plain.add_node("ib-01", gpus=8, extra_resources={"rdma/ib": "1"})
    create(plain, job("first", NS, 1, resources={"rdma/ib": "1"}))
    assert scheduled(plain, "first")["spec"]["nodeName"] == "ib-01"
    create(plain, job("second", NS, 1, resources={"rdma/ib": "1"}))  # the only one is taken
    assert condition(scheduled(plain, "second"), "PodScheduled")["message"] == (
        "0/2 nodes are available: 2 Insufficient rdma/ib. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def test_a_finished_pod_frees_its_resources(plain):
    plain.add_node("gpu-01", gpus=8)
    create(plain, job("first", NS, 8))
    create(plain, job("second", NS, 8))
    assert "nodeName" not in scheduled(plain, "second")["spec"]
    plain.advance(61)  # `sleep 60` is over: the first pod succeeds
    assert scheduled(plain, "second")["spec"]["nodeName"] == "gpu-01"


def test_a_pod_that_may_not_preempt_says_so(plain):
    plain.add_node("gpu-01", gpus=1)
    plain.seed(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        {"metadata": {"name": "online"}, "value": 1000, "preemptionPolicy": "Never"},
    )
    create(plain, job("big", NS, 2, priorityClassName="online"))
    assert condition(scheduled(plain, "big"), "PodScheduled")["message"] == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )


def test_node_selector_and_required_node_affinity(plain):
    plain.add_node("a100-01", product="NVIDIA-A100-SXM4-80GB", labels={"zone": "z1"})
    plain.add_node("h100-01", labels={"zone": "z2"})
    create(plain, job("sel", NS, 1, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}))
    assert scheduled(plain, "sel")["spec"]["nodeName"] == "a100-01"

    def affinity(*expressions):
        return {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
                }
            }
        }

    create(plain, job("notin", NS, 1, affinity=affinity({"key": "zone", "operator": "NotIn", "values": ["z1"]})))
    assert scheduled(plain, "notin")["spec"]["nodeName"] == "h100-01"
    create(plain, job("absent", NS, 1, affinity=affinity({"key": "rack", "operator": "Exists"})))
    assert condition(scheduled(plain, "absent"), "PodScheduled")["message"] == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    create(plain, job("dne", NS, 1, affinity=affinity({"key": "rack", "operator": "DoesNotExist"})))
    assert scheduled(plain, "dne")["spec"].get("nodeName")


def test_taints_need_tolerations_and_the_message_names_the_taint(plain):
    taint = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
    plain.add_node("l40s-01", product="NVIDIA-L40S", taints=[taint])
    create(plain, job("plain", NS, 1))
    assert condition(scheduled(plain, "plain"), "PodScheduled")["message"].startswith(
        "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: inference}."
    )
    tolerate = [{"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}]
    create(plain, job("tolerant", NS, 1, tolerations=tolerate))
    assert scheduled(plain, "tolerant")["spec"]["nodeName"] == "l40s-01"
    create(plain, job("wrong-value", NS, 1, tolerations=[{**tolerate[0], "value": "training"}]))
    assert "nodeName" not in scheduled(plain, "wrong-value")["spec"]
    create(plain, job("exists", NS, 1, tolerations=[{"key": "dedicated", "operator": "Exists"}]))
    assert scheduled(plain, "exists")["spec"]["nodeName"] == "l40s-01"


def test_cordoned_and_not_ready_nodes(plain):
    plain.add_node("cordoned", unschedulable=True)
    plain.add_node("down", ready=False)
    create(plain, job("p", NS, 1))
    assert condition(scheduled(plain, "p"), "PodScheduled")["message"] == (
        "0/2 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
        "1 node(s) were unschedulable. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def _affinity(kind: str, key: str, app: str) -> dict:
    return {
        kind: {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
            ]
        }
    }


def test_required_pod_affinity_keeps_a_group_in_one_topology_domain(plain):
    for i in range(4):
        plain.add_node(f"n{i}", labels={"net/leaf": "a" if i < 2 else "b"})
    plain.add_node("unlabelled")
    create(plain, job("gang", NS, 8, parallelism=3, labels=None, affinity=_affinity("podAffinity", "net/leaf", "x")))
    placed = {p["spec"].get("nodeName") for p in pods(plain, NS, "gang")}
    # The first pod may go anywhere with the label; the others follow it to leaf a, which has room for two.
    assert placed == {"n0", "n1", None}
    waiting = next(p for p in pods(plain, NS, "gang") if not p["spec"].get("nodeName"))
    assert condition(waiting, "PodScheduled")["message"].startswith(
        "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) didn't match pod affinity rules."
    )


def test_a_node_without_the_topology_key_never_satisfies_pod_affinity(plain):
    plain.add_node("n0")
    create(plain, job("solo", NS, 1, affinity=_affinity("podAffinity", "net/leaf", "x")))
    assert condition(scheduled(plain, "solo"), "PodScheduled")["message"].startswith(
        "0/1 nodes are available: 1 node(s) didn't match pod affinity rules."
    )


def test_required_anti_affinity_spreads_pods(plain):
    plain.add_node("n0", labels={"net/leaf": "a"})
    plain.add_node("n1", labels={"net/leaf": "a"})
    create(plain, job("spread", NS, 1, parallelism=2, affinity=_affinity("podAntiAffinity", "net/leaf", "x")))
    placed = sorted(str(p["spec"].get("nodeName")) for p in pods(plain, NS, "spread"))
    assert placed == ["None", "n0"]


def test_mig_time_slicing_and_volcano_vgpu_are_node_resources(plain):
    plain.add_node("mig-01", gpus=0, product="NVIDIA-A100-SXM4-80GB", mig={"1g.10gb": 7, "3g.40gb": 1})
    plain.add_node("ts-01", gpus=4, product="NVIDIA-L40S", time_slicing=4)
    node = plain.get("", "v1", "nodes", "ts-01")
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "16"
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "4"
    create(plain, job("mig", NS, 1, parallelism=8, resources={"resource": "nvidia.com/mig-1g.10gb"}))
    placed = [p["spec"].get("nodeName") for p in pods(plain, NS, "mig")]
    assert placed.count("mig-01") == 7 and placed.count(None) == 1
    shared = {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}
    create(plain, job("ts", NS, 1, parallelism=16, nodeSelector=shared))
    assert all(p["spec"].get("nodeName") == "ts-01" for p in pods(plain, NS, "ts"))


def test_an_mps_node_advertises_replicas_and_its_device_plugin_refuses_more_than_one(plain):
    """sharing.mps: the node advertises gpus x replicas and GFD labels it like a time-sliced one but for the
    strategy; a container asking for two replicas is scheduled, then the plugin's Allocate fails it at the kubelet
    (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing-mps.html#limitations)."""
    plain.add_node("mps-01", gpus=2, product="NVIDIA-L40S", mps=4)
    labels = plain.get("", "v1", "nodes", "mps-01")["metadata"]["labels"]
    assert plain.get("", "v1", "nodes", "mps-01")["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.replicas"]) == ("NVIDIA-L40S-SHARED", "4")
    assert (labels["nvidia.com/gpu.sharing-strategy"], labels["nvidia.com/gpu.count"]) == ("mps", "2")
    create(plain, job("one", NS, 1, parallelism=8))
    assert {p["status"]["phase"] for p in pods(plain, NS, "one")} == {"Running"}
    plain.advance(61)
    create(plain, job("two", NS, 2))
    failed = pods(plain, NS, "two")  # the Job controller replaces each failed pod, up to its backoffLimit
    assert {(p["spec"]["nodeName"], p["status"]["phase"], p["status"]["reason"]) for p in failed} == {
        ("mps-01", "Failed", "UnexpectedAdmissionError")
    }
    pod = failed[0]
    assert pod["status"]["message"].endswith(
        "request for 'nvidia.com/gpu: 2' too large: maximum request size for shared resources is 1, which is unexpected"
    )
    assert events(plain, pod["metadata"]["name"])[-1].startswith("UnexpectedAdmissionError: Allocate failed")
    with pytest.raises(ValueError, match="without MIG"):
        plain.add_node("mig-mps", gpus=1, mig={"1g.10gb": 7}, mps=2)


def test_hami_pods_go_to_hami_scheduler_and_fit_device_memory():
    fake = FakeKubernetes(hami=True).start()
    try:
        fake.add_namespace(NS)
        fake.add_node("plain-01", gpus=8)
        fake.add_node("hami-01", gpus=2, product="NVIDIA-A100-SXM4-80GB", memory_mib=81920, hami_split=10)
        assert fake.get("", "v1", "nodes", "hami-01")["status"]["allocatable"]["nvidia.com/gpu"] == "20"
        more = {"nvidia.com/gpumem": "40000", "nvidia.com/gpucores": "30"}
        create(fake, job("share", NS, 1, parallelism=4, resources=more))
        placed = pods(fake, NS, "share")
        assert {p["spec"]["schedulerName"] for p in placed} == {"hami-scheduler"}
        # Two devices of 80 GiB: two 40000 MiB slices each; the plain node has no HAMi devices.
        assert sorted(str(p["spec"].get("nodeName")) for p in placed) == ["hami-01"] * 4
        create(fake, job("too-big", NS, 1, resources={"nvidia.com/gpumem": "90000"}))
        (big,) = pods(fake, NS, "too-big")
        assert condition(big, "PodScheduled")["message"].startswith(
            "0/2 nodes are available: 1 CardInsufficientMemory, 1 NodeInsufficientDevice."
        )
    finally:
        fake.stop()


def test_volcano_pods_are_not_the_default_scheduler_s(plain):
    plain.add_node("gpu-01")
    create(plain, job("elsewhere", NS, 1, schedulerName="my-scheduler"))
    pod = scheduled(plain, "elsewhere")
    assert "nodeName" not in pod["spec"] and not condition(pod, "PodScheduled")


def test_scheduling_gates_hold_a_pod(plain):
    plain.add_node("gpu-01")
    create(plain, job("gated", NS, 1, schedulingGates=[{"name": "example.com/hold"}]))
    assert condition(scheduled(plain, "gated"), "PodScheduled")["reason"] == "SchedulingGated"


def test_a_missing_priority_class_refuses_the_pods(plain):
    plain.add_node("gpu-01")
    create(plain, job("urgent", NS, 1, priorityClassName="training"))
    assert pods(plain, NS, "urgent") == []
    assert any(
        e.startswith('FailedCreate: Error creating: pods "urgent-0-')
        and e.endswith("is forbidden: no PriorityClass with name training was found")
        for e in events(plain, "urgent")
    )
    plain.seed("scheduling.k8s.io", "v1", "priorityclasses", {"metadata": {"name": "training"}, "value": 500})
    plain.advance(1)
    assert scheduled(plain, "urgent")["spec"]["priority"] == 500


def test_a_resource_quota_refuses_pods_over_it(plain):
    plain.add_node("gpu-01")
    plain.seed(
        "",
        "v1",
        "resourcequotas",
        {"metadata": {"name": "gpus", "namespace": NS}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}},
    )
    create(plain, job("big", NS, 6))
    assert pods(plain, NS, "big") == []
    (event,) = [e for e in events(plain, "big") if e.startswith("FailedCreate")]
    assert event.endswith(
        "is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=6, used: requests.nvidia.com/gpu=0, "
        "limited: requests.nvidia.com/gpu=4"
    )


def test_objects_seeded_directly_skip_admission_but_requests_do_not(plain):
    with pytest.raises(ApiError) as refused:
        create(
            plain,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": NS},
                "spec": {"priorityClassName": "nope", "containers": [{"name": "c", "image": "busybox"}]},
            },
        )
    assert refused.value.code == 403
