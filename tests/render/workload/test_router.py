"""Routing and prefill/decode pools on Kubernetes (apps/backends/render/workload/router.py) and their refusal on
Slurm: the properties the golden files cannot show at a glance. Pure: no database, no cluster."""

from __future__ import annotations

import json

import pytest

from apps.backends.render.errors import RenderError
from apps.backends.render.workload import render_kubernetes, render_slurm, validation_errors
from apps.workloads.specs import apply_overrides, parse_spec
from tests.render.workload.cases import CASES, CATALOG, SERVE, kube_context, slurm_context, spec_of

ROUTED = ["vllm-cache-aware.yaml", "sglang-cache-aware.yaml", "vllm-pd.yaml", "sglang-pd.yaml"]


def rendered(name: str):
    spec = spec_of(name)
    return spec, render_kubernetes(spec, kube_context(CASES[name][2], spec)).objects


def by_kind(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


@pytest.mark.parametrize("name", ROUTED)
def test_the_service_selects_the_router_and_no_two_deployments_share_pods(name):
    spec, objects = rendered(name)
    deployments = by_kind(objects, "Deployment")
    selectors = [d["spec"]["selector"]["matchLabels"] for d in deployments.values()]
    for d in deployments.values():  # each template carries its own selector, and no other Deployment's
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert [s for s in selectors if s.items() <= labels.items()] == [d["spec"]["selector"]["matchLabels"]]
    (service,) = by_kind(objects, "Service").values()
    router = deployments["llama-70b-router" if spec.engine == "vllm" else "qwen-7b-router"]
    assert service["spec"]["selector"] == router["spec"]["selector"]["matchLabels"]
    assert router["spec"]["template"]["spec"]["serviceAccountName"] == router["metadata"]["name"]
    assert "nodeSelector" not in router["spec"]["template"]["spec"]  # no GPU, anywhere
    assert not {k for k in router["metadata"]["labels"] if k.startswith("kueue.x-k8s.io/")}  # outside the queue
    assert (
        objects[0]["kind"] == "ServiceAccount" and objects[1]["kind"] == "Role" and objects[2]["kind"] == "RoleBinding"
    )
    first_deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert first_deployment["metadata"]["name"] == spec.name  # the workload the console follows: engines
    for budget in by_kind(objects, "PodDisruptionBudget").values():
        assert budget["spec"]["selector"]["matchLabels"] in selectors


def test_router_flags_per_engine_and_mode():
    _, objects = rendered("sglang-cache-aware.yaml")
    command = by_kind(objects, "Deployment")["qwen-7b-router"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["python3", "-m", "sglang_router.launch_router"]
    assert command[command.index("--policy") + 1] == "cache_aware"
    assert command[command.index("--selector") + 1 : command.index("--selector") + 3] == [
        "gpu-console/workload=4242",
        "gpu-console/role=server",
    ]
    _, objects = rendered("vllm-cache-aware.yaml")
    router = by_kind(objects, "Deployment")["llama-70b-router"]["spec"]["template"]["spec"]["containers"][0]
    assert "command" not in router  # the image's vllm-router entrypoint
    args = router["args"]
    assert args[args.index("--routing-logic") + 1] == "prefixaware"
    assert args[args.index("--k8s-label-selector") + 1] == "gpu-console/workload=4242,gpu-console/role=server"
    assert router["readinessProbe"]["httpGet"]["path"] == "/health"


def test_pd_pools_carry_their_engine_flags_and_scale_on_their_own_queue():
    _, objects = rendered("vllm-pd.yaml")
    deployments = by_kind(objects, "Deployment")
    for pool in ("llama-70b", "llama-70b-prefill"):
        container = deployments[pool]["spec"]["template"]["spec"]["containers"][0]
        config = container["command"][container["command"].index("--kv-transfer-config") + 1]
        assert json.loads(config) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        assert {"name": "nixl", "containerPort": 5600} in container["ports"]
    prefill = deployments["llama-70b-prefill"]["spec"]["template"]
    assert prefill["metadata"]["labels"]["model"] == "prefill"
    assert prefill["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert deployments["llama-70b-prefill"]["spec"]["replicas"] == 2
    assert "replicas" not in deployments["llama-70b"]["spec"]  # decode autoscales: KEDA owns its replicas
    args = deployments["llama-70b-router"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--routing-logic") + 1] == "disaggregated_prefill"
    (scaled,) = by_kind(objects, "ScaledObject").values()
    assert scaled["spec"]["scaleTargetRef"]["name"] == "llama-70b" and scaled["spec"]["maxReplicaCount"] == 8
    query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    assert 'pod=~"llama-70b-[a-z0-9]+-[a-z0-9]+"' in query  # the decode pods only: not prefill's nor the router's
    assert deployments["llama-70b-router"]["spec"]["replicas"] == 2  # ceil((2 + 8) engines / 8)

    _, objects = rendered("sglang-pd.yaml")
    deployments = by_kind(objects, "Deployment")
    prefill = deployments["qwen-7b-prefill"]["spec"]["template"]
    command = prefill["spec"]["containers"][0]["command"]
    assert command[command.index("--disaggregation-mode") + 1] == "prefill"
    assert command[command.index("--disaggregation-transfer-backend") + 1] == "mooncake"
    assert prefill["metadata"]["annotations"]["sglang.ai/bootstrap-port"] == "8998"
    router = deployments["qwen-7b-router"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--pd-disaggregation" in router and "--prefill-selector" in router and "--decode-selector" in router


def test_a_long_name_still_validates():
    data = apply_overrides(SERVE, {"name": "x" * 63, "routing": "cache-aware"})
    spec = parse_spec("inference", data, CATALOG)
    result = render_kubernetes(spec, kube_context("kueue", spec))
    assert validation_errors(result) == []


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"routing": "cache-aware"}, "routing"),
        (
            {"replicas": 1, "disaggregation": {"prefill": {}, "decode": {}, "transfer_backend": "nixl"}},
            "disaggregation",
        ),
    ],
)
def test_slurm_refuses_routing_and_pd_by_name(overrides, field):
    spec = parse_spec("inference", apply_overrides(SERVE, {"autoscaling": None, **overrides}), CATALOG)
    with pytest.raises(RenderError) as caught:
        render_slurm(spec, slurm_context())
    assert caught.value.field == field and "Kubernetes only" in str(caught.value)


def test_a_routed_replica_must_fit_the_clusters_nodes():
    """Parsed for 8-GPU nodes, rendered for a cluster of 4-GPU nodes: refused by name, never a broken pod."""
    cache_aware = parse_spec(
        "inference", apply_overrides(SERVE, {"routing": "cache-aware", "tensor_parallel": 8}), CATALOG
    )
    with pytest.raises(RenderError) as caught:
        render_kubernetes(cache_aware, kube_context("kueue", cache_aware, gpus_per_node=4))
    assert caught.value.field == "routing"
    split = parse_spec(
        "inference",
        apply_overrides(
            SERVE,
            {
                "replicas": 1,
                "autoscaling": None,
                "tensor_parallel": 1,
                "disaggregation": {"prefill": {"gpus_per_replica": 8}, "decode": {}, "transfer_backend": "nixl"},
            },
        ),
        CATALOG,
    )
    with pytest.raises(RenderError) as caught:
        render_kubernetes(split, kube_context("kueue", split, gpus_per_node=4))
    assert caught.value.field == "disaggregation.prefill.gpus_per_replica"
