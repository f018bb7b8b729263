"""The control-plane model's Kueue Topology Aware Scheduling, against Kueue's documented behaviour and words
(tests/backends/k8s_fake/kueue_tas.py cites them): a TAS flavor's Topology, the pod-set annotations, flavor
matching, placement in one domain or refusal by name, the topology ungater, and a ClusterQueue whose flavor names
no Topology."""

from __future__ import annotations

import pytest

from tests.backends.kubernetes.model import (
    cluster_queue,
    condition,
    create,
    flavor,
    job,
    local_queue,
    pods,
    workload_of,
)

NS = "team-a"
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
QUEUE = "kueue.x-k8s.io/queue-name"
LEAF = "example.com/leaf"
HOST = "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"


def topology(name: str, *levels: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


@pytest.fixture
def tas(fake):
    """Two leaves: a (3 nodes) and b (2 nodes), 8 H100s each, and a ClusterQueue with more quota than nodes."""
    fake.add_namespace(NS)
    for name, leaf in [("n-a1", "a"), ("n-a2", "a"), ("n-a3", "a"), ("n-b1", "b"), ("n-b2", "b")]:
        fake.add_node(name, gpus=8, cpu="64", memory="512Gi", labels={LEAF: f"leaf-{leaf}"})
    create(fake, topology("h100", LEAF, HOST))
    create(fake, flavor("h100", H100, topologyName="h100"))
    create(fake, cluster_queue("team-a", {"h100": {"cpu": 640, "memory": "5Ti", "nvidia.com/gpu": 80}}))
    create(fake, local_queue("train", NS, "team-a"))
    return fake


def gang(name: str, workers: int, annotations: dict | None = None, gpus: int = 8) -> dict:
    out = job(name, NS, gpus, parallelism=workers, labels={QUEUE: "train"})
    if annotations:
        out["spec"]["template"]["metadata"]["annotations"] = annotations
    return out


def reserved(fake, name: str) -> dict:
    return condition(workload_of(fake, name, NS), "QuotaReserved")


def leaves(fake, name: str) -> set[str]:
    nodes = {p["spec"].get("nodeName") for p in pods(fake, NS, name)}
    return {(fake.get("", "v1", "nodes", n)["metadata"]["labels"][LEAF]) for n in nodes if n}


def test_a_required_leaf_puts_the_whole_gang_on_one_leaf_through_the_topology_gate(tas):
    create(tas, gang("g", 2, {REQUIRED: LEAF}))
    assert reserved(tas, "g")["status"] == "True"
    assignment = workload_of(tas, "g", NS)["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    # BestFit: the tightest leaf that holds both pods is b; the assignment names hosts (the lowest level).
    assert assignment == {
        "levels": [HOST],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"roots": ["n-b1", "n-b2"]}}],
                "podCounts": {"individual": [1, 1]},
            }
        ],
    }
    placed = pods(tas, NS, "g")
    assert sorted(p["spec"]["nodeName"] for p in placed) == ["n-b1", "n-b2"]
    assert all(p["spec"]["nodeSelector"][HOST] == p["spec"]["nodeName"] for p in placed)
    assert not any(p["spec"].get("schedulingGates") for p in placed)


def test_a_required_leaf_bigger_than_every_leaf_waits_with_kueues_reason(tas):
    create(tas, gang("big", 4, {REQUIRED: LEAF}))
    assert reserved(tas, "big") == reserved(tas, "big") | {
        "status": "False",
        "reason": "Pending",
        "message": 'couldn\'t assign flavors to pod set main: topology "h100" allows to fit only 3 out of 4 pod(s)',
    }
    assert tas.get("batch", "v1", "jobs", "big", NS)["spec"]["suspend"] is True
    assert pods(tas, NS, "big") == []


def test_used_nodes_shrink_a_leaf_and_the_reason_names_the_excluded_nodes(tas):
    create(tas, gang("first", 3, {REQUIRED: LEAF}))
    assert leaves(tas, "first") == {"leaf-a"}
    create(tas, gang("second", 3, {REQUIRED: LEAF}))
    assert reserved(tas, "second")["message"] == (
        'couldn\'t assign flavors to pod set main: topology "h100" allows to fit only 2 out of 3 pod(s). '
        'Total nodes: 5; excluded: resource "nvidia.com/gpu": 3'
    )


def test_preferred_spreads_when_no_leaf_holds_the_gang(tas):
    create(tas, gang("wide", 4, {PREFERRED: LEAF}))
    assert reserved(tas, "wide")["status"] == "True"
    assert leaves(tas, "wide") == {"leaf-a", "leaf-b"}


def test_unconstrained_and_implicit_pod_sets_fill_the_fullest_nodes_first(tas):
    create(tas, gang("half", 1, {UNCONSTRAINED: "true"}, gpus=4))
    (first,) = pods(tas, NS, "half")
    create(tas, gang("implicit", 1, gpus=4))  # a TAS-only ClusterQueue: no annotation means unconstrained
    (second,) = pods(tas, NS, "implicit")
    assert second["spec"]["nodeName"] == first["spec"]["nodeName"]  # LeastFreeCapacity: the half-used node


def test_a_level_the_topology_lacks_is_not_a_flavor_for_the_pod_set(tas):
    create(tas, gang("rack", 1, {REQUIRED: "example.com/rack"}))
    assert reserved(tas, "rack")["message"] == (
        'couldn\'t assign flavors to pod set main: Flavor "h100" does not contain the requested level'
    )


def test_a_tas_request_on_a_flavor_without_topology_and_the_reverse(fake):
    fake.add_namespace(NS)
    fake.add_node("n-1", gpus=8, cpu="64", memory="512Gi", labels={LEAF: "leaf-a"})
    fake.add_node("a100-1", gpus=8, cpu="64", memory="512Gi", product="NVIDIA-A100-SXM4-80GB")
    create(fake, topology("h100", LEAF, HOST))
    create(fake, flavor("h100", H100, topologyName="h100"))
    create(fake, flavor("a100", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}))
    quota = {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 8}
    create(fake, cluster_queue("team-a", {"h100": quota, "a100": quota}))
    create(fake, local_queue("train", NS, "team-a"))
    plain = gang("plain", 1)
    plain["spec"]["template"]["spec"]["nodeSelector"] = H100
    create(fake, plain)
    assert reserved(fake, "plain")["message"] == (
        'couldn\'t assign flavors to pod set main: Flavor "h100" supports only TopologyAwareScheduling, '
        "flavor a100 doesn't match node affinity"
    )
    asks = gang("asks", 1, {REQUIRED: LEAF})
    asks["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    create(fake, asks)
    assert reserved(fake, "asks")["message"] == (
        'couldn\'t assign flavors to pod set main: Flavor "a100" does not support TopologyAwareScheduling, '
        "flavor h100 doesn't match node affinity"
    )


def test_a_flavor_naming_no_topology_makes_its_cluster_queue_inactive(fake):
    fake.add_namespace(NS)
    fake.add_node("n-1", gpus=8, cpu="64", memory="512Gi", labels={LEAF: "leaf-a"})
    create(fake, flavor("h100", H100, topologyName="nowhere"))
    create(fake, cluster_queue("team-a", {"h100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 8}}))
    create(fake, local_queue("train", NS, "team-a"))
    create(fake, gang("j", 1, {REQUIRED: LEAF}))
    cq = fake.get("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a")
    assert condition(cq, "Active") | {"lastTransitionTime": ""} == {
        "type": "Active",
        "status": "False",
        "reason": "TopologyNotFound",
        "message": 'Can\'t admit new workloads: there is no Topology "nowhere" for TAS flavor "h100".',
        "lastTransitionTime": "",
    }
    assert reserved(fake, "j")["message"] == "ClusterQueue team-a is inactive"
    create(fake, topology("nowhere", LEAF, HOST))
    fake.advance(1)
    assert reserved(fake, "j")["status"] == "True"


def test_nodes_without_every_level_label_are_outside_the_topology(fake):
    fake.add_namespace(NS)
    fake.add_node("labelled", gpus=8, cpu="64", memory="512Gi", labels={LEAF: "leaf-a"})
    fake.add_node("bare", gpus=8, cpu="64", memory="512Gi")
    create(fake, topology("h100", LEAF, HOST))
    create(fake, flavor("h100", H100, topologyName="h100"))
    create(fake, cluster_queue("team-a", {"h100": {"cpu": 128, "memory": "1Ti", "nvidia.com/gpu": 16}}))
    create(fake, local_queue("train", NS, "team-a"))
    create(fake, gang("two", 2, {UNCONSTRAINED: "true"}))
    assert reserved(fake, "two")["message"] == (
        'couldn\'t assign flavors to pod set main: topology "h100" allows to fit only 1 out of 2 pod(s)'
    )
