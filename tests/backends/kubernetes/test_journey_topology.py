"""Journeys through the control-plane model with the cluster's own scheduler keeping gangs together
(`topology_scheduler`, docs/targets.md): Kueue's Topology Aware Scheduling and Volcano's HyperNodes. A 4 x 8 gang
that asks for one leaf switch lands on one leaf; a gang bigger than every leaf stays pending with the scheduler's
own reason; other work keeps running. See journey.py for the modelled fleet (leaf a: 4 H100 nodes, leaf b: 2)."""

from __future__ import annotations

import pytest

from apps.fleet.capacity import capacity_by_model
from apps.fleet.models import Node
from apps.fleet.services import sync_inventory
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.journey import (
    DEFAULT_LEAF,
    H100_NODES,
    inference,
    seed_fleet,
    seed_hypernodes,
    start,
    training,
)

HOST = "kubernetes.io/hostname"


@pytest.fixture
def tas_journey(personas, api, django_capture_on_commit_callbacks):
    fake = FakeKubernetes(hami=True).start()
    seed_fleet(fake)
    yield start(
        personas,
        fake,
        api,
        django_capture_on_commit_callbacks,
        queueing="kueue",
        topology_scheduler="kueue-tas",
        hami_node_labels={"gpu": "on"},
    )
    fake.stop()


@pytest.fixture
def hypernode_journey(personas, api, django_capture_on_commit_callbacks):
    fake = FakeKubernetes(hami=True).start()
    seed_fleet(fake)
    seed_hypernodes(fake)
    yield start(
        personas,
        fake,
        api,
        django_capture_on_commit_callbacks,
        queueing="volcano",
        topology_scheduler="volcano-hypernodes",
        volcano_tiers={"nvlink": 1, "leaf": 2},
    )
    fake.stop()


def leaves(journey, workload) -> set[str]:
    return {journey.node(n)["metadata"]["labels"][DEFAULT_LEAF] for n in journey.nodes(workload)}


def test_kueue_tas_gets_a_topology_per_model_and_a_flavor_naming_it(tas_journey):
    topologies = {t["metadata"]["name"]: t for t in tas_journey.fake.objects("kueue.x-k8s.io", "v1beta2", "topologies")}
    # Only the labels every node of the pool carries: the H100s have leaf switches and NVLink cliques, the A100s none.
    assert [level["nodeLabel"] for level in topologies["h100"]["spec"]["levels"]] == [
        DEFAULT_LEAF,
        "nvidia.com/gpu.clique",
        HOST,
    ]
    assert [level["nodeLabel"] for level in topologies["a100"]["spec"]["levels"]] == [HOST]
    flavors = {
        f["metadata"]["name"]: f for f in tas_journey.fake.objects("kueue.x-k8s.io", "v1beta2", "resourceflavors")
    }
    assert flavors["h100"]["spec"]["topologyName"] == "h100"
    assert "topologyName" not in flavors["a100-hami"]["spec"]  # HAMi's vGPU memory is no node resource


def test_kueue_tas_puts_a_4x8_leaf_gang_on_one_leaf(tas_journey):
    journey = tas_journey
    workload = journey.submit("training", training("gang", workers=4, gpus_per_worker=8, topology="leaf"))
    journey.wait(workload, {"running"})
    assert len(journey.nodes(workload)) == 4 and len(leaves(journey, workload)) == 1
    for pod in journey.pods(workload):
        assert "affinity" not in pod["spec"]  # Kueue placed the gang, not a pod affinity
        assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == DEFAULT_LEAF
        assert pod["spec"]["nodeSelector"][HOST] == pod["spec"]["nodeName"]
    journey.wait(workload, {"succeeded"}, seconds=360, step=30)


def test_kueue_tas_keeps_a_gang_bigger_than_any_leaf_pending_in_kueues_words(tas_journey):
    journey = tas_journey
    workload = journey.submit("training", training("huge", workers=5, gpus_per_worker=8, topology="leaf"))
    journey.settle(30)
    workload = journey.state(workload)
    # Submitted, suspended, and never started: the console shows Kueue's own reason.
    assert workload.state == "admitted", journey.why(workload)
    assert 'topology "h100" allows to fit only 4 out of 5 pod(s)' in workload.state_reason
    assert journey.nodes(workload) == []


def test_kueue_tas_still_runs_single_gpu_jobs_and_services(tas_journey):
    journey = tas_journey
    job = journey.submit("training", training("one-gpu"))
    service = journey.submit("inference", inference("chat", tensor_parallel=1))
    journey.wait(job, {"running"})
    journey.wait(service, {"running"})
    assert {*journey.nodes(job), *journey.nodes(service)} <= set(H100_NODES)


def test_kueue_tas_refuses_a_level_the_models_topology_lacks(tas_journey):
    body = tas_journey.refused("training", training("a100-leaf", gpu_model="a100", workers=2, topology="leaf"))
    assert "which the a100 Topology of this cluster does not have" in body["fields"]["topology"][0], body


def test_volcano_hypernodes_put_a_4x8_leaf_gang_in_one_leaf_hypernode(hypernode_journey):
    journey = hypernode_journey
    workload = journey.submit("training", training("gang", workers=4, gpus_per_worker=8, topology="leaf"))
    journey.wait(workload, {"running"})
    assert len(journey.nodes(workload)) == 4 and len(leaves(journey, workload)) == 1
    assert all("affinity" not in pod["spec"] for pod in journey.pods(workload))


def test_volcano_hypernodes_keep_a_gang_bigger_than_any_leaf_pending(hypernode_journey):
    journey = hypernode_journey
    workload = journey.submit("training", training("huge", workers=5, gpus_per_worker=8, topology="leaf"))
    journey.settle(30)
    workload = journey.state(workload)
    assert workload.state == "admitted", journey.why(workload)
    assert "didn't match the job's network topology (HyperNode)" in workload.state_reason, journey.why(workload)
    assert [n for n in journey.nodes(workload) if n != "-"] == []


def test_the_inventory_and_the_largest_gang_use_volcanos_hypernodes(hypernode_journey):
    """Volcano's domains, not the node labels: a tier-2 HyperNode "spine-1" over h100-a1..a3 and h100-b1 (its members
    chosen by name pattern) is the leaf switch those nodes are shown in, and the capacity page's largest gang is the
    free nodes of the biggest such HyperNode."""
    journey = hypernode_journey
    fake = journey.fake
    hypernodes = fake.resource("topology.volcano.sh", "v1alpha1", "hypernodes")
    with fake.lock:
        for h in fake.objects("topology.volcano.sh", "v1alpha1", "hypernodes"):
            if h["spec"]["tier"] == 2:
                fake.store.remove(hypernodes, "", h["metadata"]["name"])
    fake.add_hypernode("spine-1", 2, hypernodes=["nvl-h100-a1", "nvl-h100-a2", "nvl-h100-a3", "nvl-h100-b1"])
    fake.add_hypernode("spine-2", 2, hypernodes=["nvl-h100-a4", "nvl-h100-b2"])
    assert sync_inventory(journey.cluster.pk).ok
    shown = {n.name: (n.leaf_switch, n.nvlink_domain) for n in Node.objects.filter(cluster=journey.cluster)}
    assert shown["h100-b1"] == ("spine-1", "nvl-h100-b1")
    assert shown["h100-a4"] == ("spine-2", "nvl-h100-a4")
    assert shown["a100-01"] == ("", "")  # in no HyperNode
    (h100,) = [c for c in capacity_by_model(cluster=journey.cluster) if "H100" in c.gpu_model]
    assert (h100.largest_gang_leaf, h100.largest_gang_leaf_switch) == (4, "spine-1")
