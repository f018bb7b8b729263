"""The control-plane model's LeaderWorkerSet controller, KEDA and PodDisruptionBudgets, against their
documentation (cited in tests/backends/k8s_fake/workloads.py, keda.py and disruption.py)."""

from __future__ import annotations

import pytest

from tests.backends.k8s_fake.store import ApiError
from tests.backends.kubernetes.model import condition, create, events, pod_template, pods

NS = "serve"


@pytest.fixture
def serving(fake):
    fake.add_namespace(NS)
    for i in range(3):
        fake.add_node(f"n{i}", gpus=8)
    return fake


def deployment(name: str, replicas: int, gpus: int = 1) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(gpus, labels={"app": name}),
        },
    }


def test_a_leader_worker_set_creates_its_groups_as_documented(serving):
    leader = pod_template(8)
    leader["spec"]["containers"][0]["command"] = ["vllm", "serve"]
    create(
        serving,
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "sglang", "namespace": NS},
            "spec": {
                "replicas": 1,
                "leaderWorkerTemplate": {"size": 2, "leaderTemplate": leader, "workerTemplate": pod_template(8)},
            },
        },
    )
    placed = pods(serving, NS, "sglang")
    assert [p["metadata"]["name"] for p in placed] == ["sglang-0", "sglang-0-1"]
    leader_pod, worker = placed
    assert leader_pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    assert worker["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] == "0"
    assert worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/leader-name"] == "sglang-0"
    env = {e["name"]: e["value"] for e in worker["spec"]["containers"][0]["env"]}
    assert env == {"LWS_LEADER_ADDRESS": "sglang-0.sglang.serve", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}
    assert leader_pod["spec"]["containers"][0]["command"] == ["vllm", "serve"]
    service = serving.get("", "v1", "services", "sglang", NS)
    assert service["spec"]["clusterIP"] == "None"
    lws = serving.get("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "sglang", NS)
    assert lws["status"]["readyReplicas"] == 1 and condition(lws, "Available")["status"] == "True"


def test_with_the_volcano_provider_each_group_is_one_volcano_gang(db):
    from tests.backends.k8s_fake import FakeKubernetes

    fake = FakeKubernetes(lws_gang="volcano").start()
    try:
        fake.add_namespace(NS)
        for i in range(3):
            fake.add_node(f"n{i}", gpus=8)
        create(
            fake,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "serve"},
                "spec": {"capability": {"nvidia.com/gpu": 16}},
            },
        )
        template = pod_template(8, schedulerName="volcano")
        lws = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "tp16", "namespace": NS, "annotations": {"scheduling.volcano.sh/queue-name": "serve"}},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": template}},
        }
        create(fake, lws)
        groups = {g["metadata"]["name"]: g for g in fake.objects("scheduling.volcano.sh", "v1beta1", "podgroups")}
        assert len(groups) == 2
        assert {(g["spec"]["minMember"], g["spec"]["queue"]) for g in groups.values()} == {(2, "serve")}
        assert groups[next(iter(groups))]["spec"]["minResources"]["nvidia.com/gpu"] == "16"
        placed = pods(fake, NS, "tp16")
        # The queue holds 16 GPUs: one group of two 8-GPU pods runs, the other waits whole.
        assert sorted(bool(p["spec"].get("nodeName")) for p in placed) == [False, False, True, True]
        assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in placed} == set(groups)
    finally:
        fake.stop()


def scaled_object(target: str, **spec) -> dict:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "chat", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"name": target},
            "triggers": [{"type": "prometheus", "metadata": {"query": "x", "threshold": "5"}}],
            **spec,
        },
    }


def test_keda_reports_a_missing_scale_target(serving):
    create(serving, scaled_object("absent", minReplicaCount=1))
    so = serving.get("keda.sh", "v1alpha1", "scaledobjects", "chat", NS)
    assert condition(so, "Ready") | {"lastTransitionTime": ""} == {
        "type": "Ready",
        "status": "False",
        "reason": "ScaledObjectCheckFailed",
        "message": "ScaledObject doesn't have correct scaleTargetRef specification",
        "lastTransitionTime": "",
    }
    assert condition(so, "Active")["status"] == "Unknown"
    assert "ScaledObjectCheckFailed: ScaledObject doesn't have correct scaleTargetRef specification" in events(
        serving, "chat"
    )


def test_keda_keeps_the_target_within_its_bounds(serving):
    create(serving, deployment("chat", 1))
    create(serving, scaled_object("chat", minReplicaCount=2, maxReplicaCount=4))
    so = serving.get("keda.sh", "v1alpha1", "scaledobjects", "chat", NS)
    assert condition(so, "Ready")["reason"] == "ScaledObjectReady"
    assert serving.get("apps", "v1", "deployments", "chat", NS)["spec"]["replicas"] == 2
    serving.scale_metric(NS, "chat", 9)
    assert serving.get("apps", "v1", "deployments", "chat", NS)["spec"]["replicas"] == 4
    assert len(pods(serving, NS, "chat")) == 4


def test_keda_scales_to_zero_after_the_cooldown_when_its_minimum_is_zero(serving):
    create(serving, deployment("chat", 1))
    create(serving, scaled_object("chat", minReplicaCount=0, cooldownPeriod=60))
    assert serving.get("apps", "v1", "deployments", "chat", NS)["spec"]["replicas"] == 1
    serving.advance(61)
    assert serving.get("apps", "v1", "deployments", "chat", NS)["spec"]["replicas"] == 0


def pdb(min_available) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "chat", "namespace": NS},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "chat"}}},
    }


def test_a_disruption_budget_limits_evictions(serving):
    create(serving, deployment("chat", 4))
    create(serving, pdb("50%"))
    budget = serving.get("policy", "v1", "poddisruptionbudgets", "chat", NS)["status"]
    assert (budget["desiredHealthy"], budget["currentHealthy"], budget["disruptionsAllowed"]) == (2, 4, 2)
    first, second, third, _ = pods(serving, NS, "chat")
    for pod in (first, second):
        serving.control.evict(pod, None, serving.now(), dry_run=False)
    with pytest.raises(ApiError) as refused:
        serving.control.evict(third, None, serving.now(), dry_run=False)
    assert refused.value.code == 429
    assert refused.value.details["causes"][0]["message"] == (
        "The disruption budget chat needs 2 healthy pods and has 2 currently"
    )
