"""Journeys on a Kueue cluster (Kueue's default configuration) through the control-plane model: each workload
kind the console offers is submitted through the API, and must reach Running on nodes that satisfy its
constraints, then complete (training) or stay ready (inference); what the console cannot express is refused at
submission with the reason. See journey.py for the modelled fleet."""

from __future__ import annotations

import pytest

from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.journey import (
    A100,
    H100_NODES,
    inference,
    seed_fleet,
    start,
    training,
)

LEAF = "network.example.com/leaf"


@pytest.fixture
def cluster_fake():
    fake = FakeKubernetes(hami=True).start()
    seed_fleet(fake)
    yield fake
    fake.stop()


@pytest.fixture
def journey(personas, cluster_fake, api, django_capture_on_commit_callbacks):
    # HAMi's device plugin runs on the nodes labelled gpu=on (HAMi's install guide); the platform admin says so.
    return start(
        personas,
        cluster_fake,
        api,
        django_capture_on_commit_callbacks,
        queueing="kueue",
        hami_node_labels={"gpu": "on"},
    )


def test_one_gpu_runs_on_an_h100_and_completes(journey):
    workload = journey.submit("training", training("one-gpu"))
    journey.wait(workload, {"running"})
    (node,) = journey.nodes(workload)
    assert node in H100_NODES
    journey.wait(workload, {"succeeded"}, seconds=360, step=30)


def test_a_4x8_gang_runs_on_one_leaf(journey):
    workload = journey.submit("training", training("gang", workers=4, gpus_per_worker=8, topology="leaf"))
    journey.wait(workload, {"running"})
    nodes = journey.nodes(workload)
    assert (
        len(nodes) == 4 and len({journey.node(n)["metadata"]["labels"]["gpu-console/leaf-switch"] for n in nodes}) == 1
    )
    journey.wait(workload, {"succeeded"}, seconds=360, step=30)


def test_a_mig_slice_runs_on_the_mig_node(journey):
    spec = training("mig", gpu_model="a100", sharing={"mode": "mig", "mig_profile": "1g.10gb"})
    workload = journey.submit("training", spec)
    journey.wait(workload, {"running"})
    assert journey.nodes(workload) == ["a100-mig-01"]
    journey.wait(workload, {"succeeded"}, seconds=360, step=30)


def test_a_hami_share_runs_on_the_hami_node(journey):
    spec = training("hami", gpu_model="a100", sharing={"mode": "hami", "gpumem_mib": 20000, "gpucores": 30})
    workload = journey.submit("training", spec)
    journey.wait(workload, {"running"})
    assert journey.nodes(workload) == ["a100-hami-01"]
    (pod,) = journey.pods(workload)
    assert pod["spec"]["schedulerName"] == "hami-scheduler"
    journey.wait(workload, {"succeeded"}, seconds=360, step=30)


def test_a_time_sliced_share_runs_on_the_time_sliced_pool(journey):
    spec = training("shared", gpu_model="l40s", sharing={"mode": "time-slice", "replicas": 4})
    workload = journey.submit("training", spec)
    journey.wait(workload, {"running"})
    assert journey.nodes(workload) == ["l40s-ts-01"]
    journey.wait(workload, {"succeeded"}, seconds=360, step=30)


def test_an_elastic_2_to_4_job_runs_and_completes(journey):
    spec = training(
        "elastic",
        workers=4,
        gpus_per_worker=8,
        elastic={"min_workers": 2, "max_workers": 4, "checkpoint_path": "/ckpt"},
    )
    workload = journey.submit("training", spec)
    journey.wait(workload, {"running"})
    assert 2 <= len([n for n in journey.nodes(workload) if n != "-"]) <= 4
    (pod, *_) = journey.pods(workload)
    command = pod["spec"]["containers"][0]["command"]
    assert "--nnodes=2:4" in command
    journey.wait(workload, {"succeeded"}, seconds=360, step=30)


def test_vllm_tp8_serves_from_one_h100_node(journey):
    workload = journey.submit("inference", inference("chat", tensor_parallel=8))
    journey.wait(workload, {"running"})
    (node,) = journey.nodes(workload)
    assert node in H100_NODES
    journey.settle(600)
    assert journey.state(workload).state == "running"


def test_sglang_tp16_serves_from_a_leader_worker_set_on_two_nodes(journey):
    workload = journey.submit("inference", inference("big", engine="sglang", tensor_parallel=16))
    journey.wait(workload, {"running"})
    nodes = journey.nodes(workload)
    assert len(nodes) == 2 and set(nodes) <= set(H100_NODES)
    journey.settle(600)
    assert journey.state(workload).state == "running"


def test_a_keda_autoscaled_service_scales_within_its_bounds(journey):
    spec = inference("scaled", tensor_parallel=1, autoscaling={"enabled": True, "min_replicas": 1, "max_replicas": 3})
    workload = journey.submit("inference", spec)
    journey.wait(workload, {"running"})
    scaled = journey.fake.get("keda.sh", "v1alpha1", "scaledobjects", workload.backend_name, "a-serve")
    assert next(c for c in scaled["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    journey.fake.scale_metric("a-serve", workload.backend_name, 3)
    journey.settle(30)
    assert len([n for n in journey.nodes(workload) if n != "-"]) == 3
    assert journey.state(workload).state == "running"


def test_a_service_on_the_tainted_pool_tolerates_it(journey):
    workload = journey.submit("inference", inference("l40s-chat", gpu_model="l40s", tensor_parallel=1))
    journey.wait(workload, {"running"})
    (node,) = journey.nodes(workload)
    assert node in ("l40s-01", "l40s-02")


@pytest.fixture
def custom_leaf_journey(personas, api, django_capture_on_commit_callbacks):
    fake = FakeKubernetes(hami=True).start()
    seed_fleet(fake, leaf_label=LEAF)
    yield start(
        personas,
        fake,
        api,
        django_capture_on_commit_callbacks,
        queueing="kueue",
        topology_labels={"leaf": LEAF},
    )
    fake.stop()


def test_custom_topology_labels_keep_a_gang_on_one_leaf(custom_leaf_journey):
    journey = custom_leaf_journey
    workload = journey.submit("training", training("gang", workers=4, gpus_per_worker=8, topology="leaf"))
    journey.wait(workload, {"running"})
    nodes = journey.nodes(workload)
    assert len(nodes) == 4 and len({journey.node(n)["metadata"]["labels"][LEAF] for n in nodes}) == 1


@pytest.mark.parametrize(
    ("kind", "spec", "field", "text"),
    [
        ("training", training("too-wide", gpus_per_worker=16), "gpus_per_worker", "exceed the 8 GPUs per node"),
        (
            "training",
            training("no-such-slice", gpu_model="a100", sharing={"mode": "mig", "mig_profile": "1g.5gb"}),
            "sharing.mig_profile",
            "no MIG profile '1g.5gb'",
        ),
        (
            "training",
            training(
                "too-much-memory", gpu_model="a100", sharing={"mode": "hami", "gpumem_mib": 90000, "gpucores": 10}
            ),
            "sharing.gpumem_mib",
            "is more than the 81920 MiB",
        ),
        ("inference", inference("odd-tp", tensor_parallel=12), "tensor_parallel", "must be a multiple of 8"),
        ("training", training("no-such-model", gpu_model="h200"), "gpu_model", ""),
        # What only the cluster's inventory can tell: no pool of L40S time-sliced 8 ways, no HAMi on the H100s.
        (
            "training",
            training("eight-ways", gpu_model="l40s", sharing={"mode": "time-slice", "replicas": 8}),
            "sharing.replicas",
            "Cluster gpu-prod cannot run this workload",
        ),
        (
            "training",
            training("hami-h100", gpu_model="h100", sharing={"mode": "hami", "gpumem_mib": 20000, "gpucores": 30}),
            "sharing.mode",
            "no h100 node of this cluster carries the HAMi node labels gpu=on",
        ),
    ],
)
def test_what_the_console_cannot_express_is_refused_at_submission(journey, kind, spec, field, text):
    body = journey.refused(kind, spec)
    assert field in str(body), body
    assert text in str(body), body
    assert journey.fake.objects("batch", "v1", "jobs") == []


def test_nodes_are_what_the_model_says(journey):
    """The fleet as the journeys assume it (a guard against a fixture that silently changed)."""
    assert journey.node("a100-mig-01")["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "28"
    assert journey.node("l40s-ts-01")["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    assert journey.node("a100-01")["metadata"]["labels"]["nvidia.com/gpu.product"] == A100


def test_a_disaggregated_sglang_service_runs_its_router_and_both_pools_and_cancels_whole(journey):
    """Routing and PD (issue 24): the router Deployment and Service in front, prefill and decode pools with their
    PD flags, each pool scaled by its own ScaledObject; cancel takes every part away."""
    from apps.backends.registry import get_backend

    spec = inference(
        "pd",
        engine="sglang",
        routing="cache-aware",
        disaggregation={
            "prefill": {"replicas": 1, "autoscaling": {"enabled": True, "min_replicas": 1, "max_replicas": 2}},
            "decode": {"replicas": 2},
        },
    )
    workload = journey.submit("inference", spec)
    journey.wait(workload, {"running"})
    fake, ns, name = journey.fake, "a-serve", workload.backend_name
    deployments = {d["metadata"]["name"] for d in fake.objects("apps", "v1", "deployments")}
    assert {name, f"{name}-prefill", f"{name}-router"} <= deployments
    roles = sorted(p["metadata"]["labels"]["gpu-console/role"] for p in journey.pods(workload))
    assert roles == ["decode", "decode", "prefill", "router"]
    by_role = {p["metadata"]["labels"]["gpu-console/role"]: p for p in journey.pods(workload)}
    assert "--disaggregation-mode" in by_role["prefill"]["spec"]["containers"][0]["command"]
    router = by_role["router"]["spec"]
    assert router["serviceAccountName"] == f"{name}-router" and "nodeName" in router
    assert "--pd-disaggregation" in router["containers"][0]["command"]
    service = fake.get("", "v1", "services", f"{name}-api", ns)
    assert service["spec"]["selector"]["gpu-console/role"] == "router"
    assert fake.get("rbac.authorization.k8s.io", "v1", "roles", f"{name}-router", ns)["rules"][0]["resources"] == [
        "pods"
    ]
    scaled = fake.get("keda.sh", "v1alpha1", "scaledobjects", f"{name}-prefill", ns)
    assert scaled["spec"]["scaleTargetRef"]["name"] == f"{name}-prefill"
    fake.scale_metric(ns, f"{name}-prefill", 6)
    journey.settle(30)
    assert len([p for p in journey.pods(workload) if p["metadata"]["labels"]["gpu-console/role"] == "prefill"]) == 2

    get_backend(journey.cluster).cancel(name)
    journey.settle(30)
    left = [
        (kind, o["metadata"]["name"])
        for group, version, plural, kind in (
            ("apps", "v1", "deployments", "Deployment"),
            ("", "v1", "serviceaccounts", "ServiceAccount"),
            ("rbac.authorization.k8s.io", "v1", "roles", "Role"),
            ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
            ("", "v1", "services", "Service"),
            ("keda.sh", "v1alpha1", "scaledobjects", "ScaledObject"),
        )
        for o in fake.objects(group, version, plural)
        if o["metadata"]["name"].startswith(name) and not o["metadata"].get("deletionTimestamp")
    ]
    assert left == []
