"""RDMA journeys through the control-plane model: a platform admin declares the H100 pool's InfiniBand fabric through
the API, multi-node work is submitted through the API, and the modelled kube-scheduler (through Volcano's allocate,
or after Kueue's admission) counts the RDMA device plugin's extended resource per node, as it counts every extended
resource (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources): pods
run where the plugin advertises it and wait, with the scheduler's message, where it does not.

The modelled device plugin is the k8s-rdma-shared-dev-plugin, advertising `rdma/ib` on the nodes whose HCAs it
shares (https://github.com/Mellanox/k8s-rdma-shared-dev-plugin: `rdma/<resourceName>`, `rdmaHcaMax` pods per HCA).
See journey.py for the modelled fleet."""

from __future__ import annotations

import pytest

from apps.fleet.models import Node, NodePool
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.k8s_fake.kueue import KueueConfig
from tests.backends.kubernetes.journey import H100_NODES, inference, seed_fleet, seed_hypernodes, start, training
from tests.utils.personas import fresh

RDMA = "rdma/ib"
INFINIBAND = {"fabric": "infiniband", "rdma_resource": RDMA, "nccl_ib_hca": "mlx5", "nccl_socket_ifname": "=eth0"}


def advertise(fake: FakeKubernetes, nodes: list[str], count: int = 1000) -> None:
    """The shared RDMA device plugin on `nodes`: rdma/ib in their capacity and allocatable (rdmaHcaMax pods)."""
    for name in nodes:
        node = fake.get("", "v1", "nodes", name)
        node["status"]["capacity"][RDMA] = str(count)
        node["status"]["allocatable"][RDMA] = str(count)
        with fake.lock:
            fake.store.put(fake.resource("", "v1", "nodes"), node)


def declare(journey, body: dict) -> dict:
    pool = NodePool.objects.get(cluster=journey.cluster, name="h100")
    response = journey.api(fresh(journey.personas.platform_admin)).patch(
        f"/api/v1/pools/{pool.pk}/", {**body, "reason": "HDR InfiniBand"}, format="json"
    )
    assert response.status_code == 200, response.json()
    return response.json()


def scheduled_message(journey, workload) -> str:
    return " ".join(
        c.get("message", "")
        for pod in journey.pods(workload)
        for c in pod["status"].get("conditions", [])
        if c["type"] == "PodScheduled" and c["status"] == "False"
    )


@pytest.fixture
def volcano_fake():
    fake = FakeKubernetes(lws_gang="volcano").start()
    seed_fleet(fake)
    seed_hypernodes(fake)
    yield fake
    fake.stop()


@pytest.fixture
def volcano(personas, volcano_fake, api, django_capture_on_commit_callbacks):
    return start(personas, volcano_fake, api, django_capture_on_commit_callbacks, queueing="volcano")


def test_a_gang_on_an_infiniband_pool_runs_on_nodes_with_the_rdma_device_with_the_pools_nccl_settings(volcano):
    advertise(volcano.fake, H100_NODES)
    declare(volcano, INFINIBAND)
    workload = volcano.submit("training", training("ib-gang", workers=4, gpus_per_worker=8, topology="leaf"))
    volcano.wait(workload, {"running"})
    assert len(volcano.nodes(workload)) == 4 and set(volcano.nodes(workload)) <= set(H100_NODES)
    for pod in volcano.pods(workload):
        container = pod["spec"]["containers"][0]
        assert container["resources"]["limits"][RDMA] == "1"
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        env = {item["name"]: item.get("value") for item in container["env"]}
        assert (env["NCCL_IB_DISABLE"], env["NCCL_IB_HCA"], env["NCCL_SOCKET_IFNAME"]) == ("0", "mlx5", "=eth0")


def test_where_the_device_plugin_advertises_too_few_the_gang_waits_with_the_schedulers_message(volcano):
    advertise(volcano.fake, ["h100-a1", "h100-a2"])
    declare(volcano, INFINIBAND)
    workload = volcano.submit("training", training("short", workers=4, gpus_per_worker=8))
    volcano.settle(30)
    assert volcano.state(workload).state == "admitted", volcano.why(workload)  # the cluster holds it, not running
    assert volcano.nodes(workload) == ["-"] * 4  # the gang: none bound unless all four fit
    assert f"Insufficient {RDMA}" in scheduled_message(volcano, workload)
    assert f"Insufficient {RDMA}" in volcano.state(workload).state_reason, volcano.why(workload)
    # The same job over sockets needs no RDMA device: it runs.
    tcp = volcano.submit("training", training("over-tcp", workers=4, gpus_per_worker=8, network="tcp"))
    volcano.wait(tcp, {"running"})
    assert all(RDMA not in p["spec"]["containers"][0]["resources"]["limits"] for p in volcano.pods(tcp))


def test_inventory_sync_shows_which_nodes_advertise_the_rdma_resource(volcano):
    from apps.fleet.services import sync_inventory

    advertise(volcano.fake, ["h100-a1"], count=8)
    assert sync_inventory(volcano.cluster.pk).ok
    offered = {n.name: n.extended_resources for n in Node.objects.filter(cluster=volcano.cluster)}
    assert offered["h100-a1"] == {RDMA: 8} and offered["h100-a2"] == {}


def test_a_multi_node_service_on_infiniband_runs_its_group_on_rdma_nodes(volcano):
    advertise(volcano.fake, H100_NODES)
    declare(volcano, INFINIBAND)
    workload = volcano.submit("inference", inference("big", engine="sglang", tensor_parallel=16))
    volcano.wait(workload, {"running"})
    pods = volcano.pods(workload)
    assert len(pods) == 2 and all(p["spec"]["containers"][0]["resources"]["limits"][RDMA] == "1" for p in pods)


def test_rdma_on_a_pool_without_an_rdma_fabric_is_refused_at_submission_naming_the_field(volcano):
    refused = volcano.refused("training", training("a100-rdma", gpu_model="a100", workers=2, network="rdma"))
    assert "network" in refused["fields"], refused


@pytest.fixture
def kueue_fake():
    # The site's Kueue leaves the RDMA resource out of quota (Configuration resources.excludeResourcePrefixes).
    fake = FakeKubernetes(kueue=KueueConfig(exclude_resource_prefixes=("rdma/",))).start()
    seed_fleet(fake)
    advertise(fake, H100_NODES)
    yield fake
    fake.stop()


def test_on_kueue_an_rdma_job_is_admitted_when_the_site_excludes_the_resource(
    personas, kueue_fake, api, django_capture_on_commit_callbacks
):
    journey = start(
        personas,
        kueue_fake,
        api,
        django_capture_on_commit_callbacks,
        queueing="kueue",
        kueue_excluded_resources=["rdma/"],
    )
    declare(journey, INFINIBAND)
    workload = journey.submit("training", training("kueue-ib", workers=2, gpus_per_worker=8))
    journey.wait(workload, {"running"})
    assert all(p["spec"]["containers"][0]["resources"]["limits"][RDMA] == "1" for p in journey.pods(workload))
