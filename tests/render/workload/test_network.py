"""The network between nodes (render/workload/network.py): a pool's fabric, the spec's `network`, and what each
renderer makes of them. Pure tests: no database, no cluster."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from apps.backends.render.errors import RenderError
from apps.backends.render.workload import render_kubernetes, render_slurm, validation_errors
from apps.backends.render.workload.network import Fabric, fabric_errors, network_plan, spans_nodes
from apps.workloads.specs import apply_overrides, parse_spec
from tests.render.workload.cases import (
    CATALOG,
    ETHERNET,
    INFINIBAND,
    ROCE,
    SERVE,
    SLURM_INFINIBAND,
    TRAINING,
    kube_context,
    slurm_context,
)


def train(**overrides):
    return parse_spec("training", apply_overrides(TRAINING, overrides), CATALOG)


def serve(**overrides):
    return parse_spec("inference", apply_overrides(SERVE, overrides), CATALOG)


def pods(rendered) -> list[dict]:
    """Every pod template of the rendering (Job, Volcano task, LeaderWorkerSet leader and worker, Deployment)."""
    out = []
    for obj in rendered.objects:
        spec = obj["spec"]
        for task in spec.get("tasks", []):
            out.append(task["template"])
        if "template" in spec:
            out.append(spec["template"])
        template = spec.get("leaderWorkerTemplate") or {}
        out += [template[key] for key in ("leaderTemplate", "workerTemplate") if key in template]
    return out


def env_of(container: dict) -> dict[str, str]:
    return {item["name"]: item.get("value") for item in container.get("env", [])}


# --- which network a workload gets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "fabric", "transport"),
    [
        (train(), INFINIBAND, "rdma"),  # auto, 4 workers: spans nodes of an InfiniBand pool
        (train(), ROCE, "rdma"),
        (train(), ETHERNET, "tcp"),
        (train(), None, ""),  # no pool, or a pool whose fabric is not declared: NCCL chooses
        (train(), Fabric(), ""),
        (train(workers=1), INFINIBAND, ""),  # one node: NVLink and shared memory
        (train(workers=2, gpus_per_worker=4, topology="node"), INFINIBAND, ""),  # all on one node
        (
            train(workers=1, elastic={"min_workers": 1, "max_workers": 4, "checkpoint_path": "/ckpt/x"}),
            INFINIBAND,
            "rdma",
        ),  # may grow to four workers
        (train(network="tcp"), INFINIBAND, "tcp"),
        (train(workers=1, network="rdma"), INFINIBAND, "rdma"),  # asked for, even on one node
        (serve(tensor_parallel=8, pipeline_parallel=2, autoscaling=None), INFINIBAND, "rdma"),  # a replica on 2 nodes
        (serve(), INFINIBAND, ""),  # replicas of one node each
    ],
)
def test_auto_is_rdma_between_nodes_of_an_rdma_pool_tcp_on_ethernet_else_nccls_own_choice(spec, fabric, transport):
    assert network_plan(spec, fabric).transport == transport


def test_spans_nodes_counts_workers_not_on_one_node_and_multi_node_replicas():
    assert spans_nodes(train())
    assert not spans_nodes(train(workers=1))
    assert not spans_nodes(train(workers=4, gpus_per_worker=2, topology="node"))
    assert spans_nodes(serve(tensor_parallel=8, pipeline_parallel=2, autoscaling=None))
    assert not spans_nodes(serve(tensor_parallel=8))


def test_rdma_on_a_pool_without_an_rdma_fabric_is_refused_naming_the_field_and_the_pool():
    for fabric in (ETHERNET, Fabric(pool="h100-training"), None):
        with pytest.raises(RenderError) as caught:
            network_plan(train(network="rdma"), fabric)
        assert caught.value.field == "network"
        assert "InfiniBand or RoCE" in caught.value.reason and "network auto or tcp" in caught.value.reason
    with pytest.raises(RenderError) as caught:
        render_kubernetes(train(network="rdma"), kube_context("volcano", train(), fabric=ETHERNET))
    assert caught.value.field == "network" and "h100-training" in caught.value.reason
    with pytest.raises(RenderError) as caught:
        ethernet = replace(SLURM_INFINIBAND, kind="ethernet", slurm_gres="", nccl_ib_hca="")
        render_slurm(train(network="rdma"), slurm_context(fabric=ethernet))
    assert caught.value.field == "network"


def test_nccl_environment_per_fabric():
    assert network_plan(train(), INFINIBAND).env == {
        "NCCL_IB_DISABLE": "0",
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1",
        "NCCL_SOCKET_IFNAME": "=eth0",
    }
    assert network_plan(train(), ROCE).env == {
        "NCCL_IB_DISABLE": "0",
        "NCCL_IB_HCA": "mlx5",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_SOCKET_IFNAME": "net1",
    }
    assert network_plan(train(), ETHERNET).env == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "^lo,docker"}
    # tcp on an RDMA pool: sockets, on the pool's socket interface; no RDMA device, no GRES
    plan = network_plan(train(network="tcp"), SLURM_INFINIBAND)
    assert plan.env == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=ib0"}
    assert (plan.resources, plan.ipc_lock, plan.slurm_gres) == ({}, False, "")


# --- what a pool may declare ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fabric", "renderer", "field", "fragment"),
    [
        (Fabric(kind="myrinet"), "kubernetes", "fabric", "not one of none, ethernet, roce, infiniband"),
        (Fabric(kind="infiniband"), "kubernetes", "rdma_resource", "needs the extended resource"),
        (Fabric(kind="infiniband", rdma_resource="ib"), "kubernetes", "rdma_resource", "<domain>/<name>"),
        (Fabric(kind="infiniband", rdma_resource="nvidia.com/gpu"), "kubernetes", "rdma_resource", "GPU"),
        (Fabric(kind="infiniband", rdma_resource="kubernetes.io/ib"), "kubernetes", "rdma_resource", "kubernetes.io"),
        (Fabric(kind="ethernet", rdma_resource="rdma/ib"), "kubernetes", "rdma_resource", "roce, infiniband"),
        (Fabric(kind="none", nccl_socket_ifname="eth0"), "kubernetes", "nccl_socket_ifname", "ethernet, roce"),
        (
            Fabric(kind="infiniband", rdma_resource="rdma/ib", nccl_ib_gid_index=3),
            "kubernetes",
            "nccl_ib_gid_index",
            "roce",
        ),
        (
            Fabric(kind="roce", rdma_resource="rdma/x", nccl_ib_gid_index=256),
            "kubernetes",
            "nccl_ib_gid_index",
            "0 to 255",
        ),
        (
            Fabric(kind="roce", rdma_resource="rdma/x", nccl_ib_hca="mlx5_0;rm -rf"),
            "kubernetes",
            "nccl_ib_hca",
            "NCCL_IB_HCA",
        ),
        (
            Fabric(kind="roce", rdma_resource="rdma/x", nccl_ib_hca="mlx5_0:1:2"),
            "kubernetes",
            "nccl_ib_hca",
            "NCCL_IB_HCA",
        ),
        (Fabric(kind="ethernet", nccl_socket_ifname="eth0 eth1"), "kubernetes", "nccl_socket_ifname", "NCCL_SOCKET"),
        (Fabric(kind="ethernet", nccl_socket_ifname="=eth0\n"), "kubernetes", "nccl_socket_ifname", "NCCL_SOCKET"),
        (Fabric(kind="roce", rdma_resource="rdma/x", rdma_per_pod=0), "kubernetes", "rdma_per_pod", "from 1 to 64"),
        (
            Fabric(kind="roce", rdma_resource="rdma/x", pod_networks="a/b/c"),
            "kubernetes",
            "pod_networks",
            "[namespace/]",
        ),
        (
            Fabric(kind="roce", rdma_resource="rdma/x", pod_networks="Net_1"),
            "kubernetes",
            "pod_networks",
            "[namespace/]",
        ),
        (Fabric(kind="roce", rdma_resource="rdma/x", slurm_gres="ib:1"), "kubernetes", "slurm_gres", "Slurm setting"),
        (Fabric(kind="infiniband", rdma_resource="rdma/ib"), "slurm", "rdma_resource", "Kubernetes setting"),
        (Fabric(kind="infiniband", pod_networks="net"), "slurm", "pod_networks", "Kubernetes setting"),
        (Fabric(kind="infiniband", slurm_gres="ib"), "slurm", "slurm_gres", "name[:type]:count"),
        (Fabric(kind="infiniband", slurm_gres="ib:1,gpu:8"), "slurm", "slurm_gres", "name[:type]:count"),
    ],
)
def test_a_fabric_setting_that_does_not_belong_is_refused_naming_it(fabric, renderer, field, fragment):
    problems = dict(fabric_errors(fabric, renderer))
    assert field in problems, problems
    assert fragment in problems[field]


@pytest.mark.parametrize(
    ("fabric", "renderer"),
    [
        (INFINIBAND, "kubernetes"),
        (ROCE, "kubernetes"),
        (ETHERNET, "kubernetes"),
        (SLURM_INFINIBAND, "slurm"),
        (Fabric(), "kubernetes"),
        (Fabric(), "slurm"),
        (Fabric(kind="infiniband"), "slurm"),  # Slurm needs no resource name: the devices are on the nodes
        (
            Fabric(
                kind="roce", rdma_resource="rdma/roce", pod_networks="kube-system/roce-a,roce-b", nccl_ib_hca="^=mlx5_4"
            ),
            "kubernetes",
        ),
    ],
)
def test_a_valid_fabric_has_no_problem(fabric, renderer):
    assert fabric_errors(fabric, renderer) == []


def test_a_context_with_an_invalid_fabric_is_refused_by_both_renderers():
    with pytest.raises(RenderError) as caught:
        render_kubernetes(train(), kube_context("volcano", train(), fabric=Fabric(kind="infiniband")))
    assert caught.value.field == "fabric.rdma_resource"
    with pytest.raises(RenderError) as caught:
        render_slurm(train(), slurm_context(fabric=INFINIBAND))
    assert caught.value.field == "fabric.rdma_resource"


# --- Kubernetes ------------------------------------------------------------------------------------------------


def test_every_pod_of_a_multi_node_lws_on_infiniband_requests_the_rdma_device_and_may_lock_memory():
    spec = serve(tensor_parallel=8, pipeline_parallel=2, autoscaling=None)
    rendered = render_kubernetes(spec, kube_context("volcano", spec, fabric=INFINIBAND))
    templates = pods(rendered)
    assert len(templates) == 2  # leader and worker
    for template in templates:
        container = template["spec"]["containers"][0]
        assert container["resources"]["requests"]["rdma/ib"] == container["resources"]["limits"]["rdma/ib"] == "1"
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert env_of(container)["NCCL_IB_DISABLE"] == "0"
    assert validation_errors(rendered) == []
    assert not any("slow without InfiniBand" in caveat for caveat in rendered.caveats)


def test_the_specs_own_nccl_variables_win_over_the_pools():
    spec = train(env={"NCCL_IB_HCA": "=mlx5_7", "NCCL_DEBUG": "INFO"})
    volcano = render_kubernetes(spec, kube_context("volcano", spec, fabric=INFINIBAND))
    ctx = kube_context("kueue+trainjob", spec, fabric=INFINIBAND, kueue_excluded_resources=("rdma/",))
    trainjob = render_kubernetes(spec, ctx)
    for container in (pods(volcano)[0]["spec"]["containers"][0], trainjob.objects[0]["spec"]["trainer"]):
        env = env_of(container)
        assert env["NCCL_IB_HCA"] == "=mlx5_7" and env["NCCL_IB_DISABLE"] == "0"
        assert [item["name"] for item in container["env"]].count("NCCL_IB_HCA") == 1


def test_ethernet_pools_get_sockets_and_no_rdma_device_or_capability():
    spec = train()
    rendered = render_kubernetes(spec, kube_context("kueue", spec, fabric=ETHERNET))
    container = pods(rendered)[0]["spec"]["containers"][0]
    assert env_of(container)["NCCL_IB_DISABLE"] == "1"
    assert "securityContext" not in container
    assert set(container["resources"]["limits"]) == {"memory", "nvidia.com/gpu"}


def test_without_a_declared_fabric_nothing_changes():
    spec = train()
    plain = render_kubernetes(spec, kube_context("kueue", spec)).objects
    assert render_kubernetes(spec, kube_context("kueue", spec, fabric=Fabric(pool="h100-training"))).objects == plain


def test_roce_pods_attach_the_pools_networks():
    spec = train()
    rendered = render_kubernetes(spec, kube_context("volcano", spec, fabric=ROCE))
    for template in pods(rendered):
        assert template["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "roce-hostdev"


def test_on_kueue_an_rdma_resource_outside_kueue_excluded_resources_is_refused_as_kueue_would_never_admit_it():
    spec = train()
    with pytest.raises(RenderError) as caught:
        render_kubernetes(spec, kube_context("kueue", spec, fabric=INFINIBAND))
    assert caught.value.field == "network"
    assert "excludeResourcePrefixes" in caught.value.reason and "kueue_excluded_resources" in caught.value.reason
    ctx = kube_context("kueue", spec, fabric=INFINIBAND, kueue_excluded_resources=("rdma/",))
    assert validation_errors(render_kubernetes(spec, ctx)) == []
    # Volcano quotas only the resources a queue's capability lists: no setting needed
    render_kubernetes(spec, kube_context("volcano", spec, fabric=INFINIBAND))


def test_a_trainjob_says_its_runtime_must_add_ipc_lock_and_the_networks():
    spec = train()
    ctx = kube_context("kueue+trainjob", spec, fabric=ROCE, kueue_excluded_resources=("nvidia.com/hostdev",))
    rendered = render_kubernetes(spec, ctx)
    trainer = rendered.objects[0]["spec"]["trainer"]
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/hostdev"] == "8"
    assert env_of(trainer)["NCCL_IB_GID_INDEX"] == "3"
    assert any("IPC_LOCK" in caveat and "torch-distributed" in caveat for caveat in rendered.caveats)
    assert any("roce-hostdev" in caveat for caveat in rendered.caveats)


# --- Slurm -----------------------------------------------------------------------------------------------------


def test_slurm_exports_the_nccl_environment_and_requests_the_fabrics_gres_but_never_network():
    script = render_slurm(train(), slurm_context(fabric=SLURM_INFINIBAND)).script
    assert "#SBATCH --gres=gpu:a100:8,ib:1" in script
    assert "export NCCL_IB_DISABLE=0\nexport NCCL_IB_HCA==mlx5_0:1,mlx5_1:1\nexport NCCL_SOCKET_IFNAME==ib0\n" in script
    assert "--network" not in script
    assert "PropagateResourceLimitsExcept=MEMLOCK" in script
    tcp = render_slurm(train(network="tcp"), slurm_context(fabric=SLURM_INFINIBAND)).script
    assert "#SBATCH --gres=gpu:a100:8\n" in tcp and "export NCCL_IB_DISABLE=1\n" in tcp and "ulimit -l" not in tcp
    single = render_slurm(train(workers=1), slurm_context(fabric=SLURM_INFINIBAND)).script
    assert "NCCL_IB" not in single and "NCCL_SOCKET" not in single and "ib:1" not in single


def test_slurm_multi_node_inference_gets_the_environment_too():
    spec = serve(tensor_parallel=8, pipeline_parallel=2, autoscaling=None)
    script = render_slurm(spec, slurm_context(fabric=SLURM_INFINIBAND)).script
    assert "#SBATCH --gres=gpu:a100:8,ib:1" in script and "export NCCL_IB_DISABLE=0" in script


def test_the_spec_example_of_docs_networking_parses_and_renders_over_rdma():
    text = (Path(__file__).resolve().parents[3] / "docs" / "networking.md").read_text()
    (example,) = re.findall(r"```json\n(.*?)```", text, re.S)
    data = json.loads(example)
    spec = parse_spec(data.pop("kind"), data, CATALOG)
    rendered = render_kubernetes(spec, kube_context("volcano", spec, fabric=INFINIBAND))
    assert network_plan(spec, INFINIBAND).transport == "rdma" and validation_errors(rendered) == []
