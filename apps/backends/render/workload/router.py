"""The router in front of an inference service's engines: cache-aware routing, and prefill/decode pools.

With `routing: cache-aware` or a `disaggregation`, the service's Service ("<name>-api", the endpoint clients
already use) selects a router Deployment instead of the engines, and the router finds the engine pods itself
through the Kubernetes API (a ServiceAccount with a Role to get, list and watch pods in the namespace):

* SGLang: SGLang's router (`python3 -m sglang_router.launch_router`, shipped in the SGLang image) with
  `--policy cache_aware|round_robin`, `--service-discovery --selector <labels> --service-discovery-namespace
  --service-discovery-port`, and for PD `--pd-disaggregation --prefill-selector --decode-selector`; a prefill
  pod names its bootstrap port in the `sglang.ai/bootstrap-port` annotation. Health: GET /liveness, and
  /readiness, which answers 200 only while a healthy worker is registered. (SGLang Model Gateway docs:
  https://docs.sglang.io/advanced_features/sgl_model_gateway.html, sections Service Discovery, Kubernetes
  Deployment, Admin and Health Endpoints, Configuration Reference.)
* vLLM: the vLLM production-stack router (`vllm-router`, the image's entrypoint) with `--service-discovery k8s
  --k8s-namespace --k8s-port --k8s-label-selector` and `--routing-logic prefixaware|roundrobin`; for PD
  `--routing-logic disaggregated_prefill --prefill-model-labels prefill --decode-model-labels decode`, which it
  matches against each engine pod's `model` label. Health: GET /health. (production-stack
  src/vllm_router/parsers/parser.py, src/vllm_router/service_discovery.py and helm/templates/deployment-router.yaml;
  https://docs.vllm.ai/projects/production-stack/en/latest/use_cases/prefix-aware-routing.html.)

Engines are pools of single-node Deployments (role server, or prefill and decode), each with its own disruption
budget and, with autoscaling, its own KEDA ScaledObject on the engine's waiting-request gauge of that pool's
pods. The decode pool keeps the service's name: it is the Deployment the console follows as the workload.
The router needs no GPU and runs outside the queue (no Kueue or Volcano queue label: it would be admitted
against a GPU ClusterQueue that has no CPU quota for it); its replicas follow the engine count at full scale,
one router per ROUTER_ENGINES engines, at most ROUTER_MAX (each replica keeps its own prefix tree, so fewer
routers route better; the SGLang docs estimate a 10-20% lower cache hit rate for several).
"""

from __future__ import annotations

import math

from apps.backends.render.spec import InferenceServiceSpec
from apps.backends.render.workload.common import (
    ROLE_LABEL,
    WORKLOAD_LABEL,
    console_labels,
    meta,
    selector,
)
from apps.backends.render.workload.context import RenderContext
from apps.backends.render.workload.inference import (
    PD_MODEL_LABEL,
    engine_objects,
    pool_spec,
    replica_floor,
    waiting_query,
)

ROUTER_ROLE = "router"
# production-stack's router image; the SGLang router ships in the SGLang image the engines run.
VLLM_ROUTER_IMAGE = "lmcache/lmstack-router:0.1.9.dev9-g37bafbcf5.d20260107"
ROUTER_ENGINES = 8
ROUTER_MAX = 4
ROUTER_CPU, ROUTER_MEMORY = "2", "4Gi"
POLICY = {
    "sglang": {"cache-aware": "cache_aware", "round-robin": "round_robin"},
    "vllm": {"cache-aware": "prefixaware", "round-robin": "roundrobin"},
}
HEALTH = {"sglang": ("/liveness", "/readiness"), "vllm": ("/health", "/health")}  # (liveness, readiness)


def router_name(name: str) -> str:
    return f"{name}-router"


def engine_pools(spec: InferenceServiceSpec, name: str) -> list[tuple[str, str, InferenceServiceSpec]]:
    """(object name, role, the pool's spec) for each engine pool; the decode pool (or the only one) is `name`."""
    if spec.disaggregation is None:
        return [(name, "server", spec)]
    return [(name, "decode", pool_spec(spec, "decode")), (f"{name}-prefill", "prefill", pool_spec(spec, "prefill"))]


def engines_at_full_scale(spec: InferenceServiceSpec) -> int:
    pools = [pool_spec(spec, role) for role, _ in spec.pools()] or [spec]
    return sum(max(p.replicas, p.autoscaling.max_replicas or 0) if p.autoscaling.enabled else p.replicas for p in pools)


def router_replicas(spec: InferenceServiceSpec) -> int:
    return min(ROUTER_MAX, max(1, math.ceil(engines_at_full_scale(spec) / ROUTER_ENGINES)))


def routed_objects(spec: InferenceServiceSpec, ctx: RenderContext, name: str, service: str) -> list[dict]:
    """In apply order: the router's account and its pod-reading Role, the engine pools, the router, its Service."""
    account = router_name(name)
    objects = _rbac(spec, ctx, account)
    for pool_name, role, pool in engine_pools(spec, name):
        objects += engine_objects(pool, ctx, pool_name, role)
    objects.append(_router_deployment(spec, ctx, name, account))
    if router_replicas(spec) > 1:
        objects.append(_router_budget(spec, ctx, name))
    objects.append(_router_service(spec, ctx, service))
    return objects


def router_argv(spec: InferenceServiceSpec, ctx: RenderContext) -> tuple[str, list[str], list[str]]:
    """(image, command, args) of the router container; the vLLM router runs as its image's entrypoint."""
    workload = f"{WORKLOAD_LABEL}={ctx.workload_id}"
    policy = POLICY[spec.engine][spec.routing]
    port = str(spec.port)
    if spec.engine == "sglang":
        argv = ["python3", "-m", "sglang_router.launch_router", "--host", "0.0.0.0", "--port", port]  # noqa: S104
        argv += ["--policy", policy, "--service-discovery"]
        argv += ["--service-discovery-namespace", ctx.namespace, "--service-discovery-port", port]
        if spec.disaggregation:
            argv += ["--pd-disaggregation"]
            argv += ["--prefill-selector", workload, f"{ROLE_LABEL}=prefill"]
            argv += ["--decode-selector", workload, f"{ROLE_LABEL}=decode"]
        else:
            argv += ["--selector", workload, f"{ROLE_LABEL}=server"]
        return spec.image, argv, []
    args = ["--host", "0.0.0.0", "--port", port, "--service-discovery", "k8s"]  # noqa: S104
    args += ["--k8s-namespace", ctx.namespace, "--k8s-port", port]
    if spec.disaggregation:
        args += ["--k8s-label-selector", workload, "--routing-logic", "disaggregated_prefill"]
        args += ["--prefill-model-labels", "prefill", "--decode-model-labels", "decode"]
    else:
        args += ["--k8s-label-selector", f"{workload},{ROLE_LABEL}=server", "--routing-logic", policy]
    return VLLM_ROUTER_IMAGE, [], args


def _rbac(spec: InferenceServiceSpec, ctx: RenderContext, account: str) -> list[dict]:
    labels = console_labels(spec, ctx)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(account, ctx, labels)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(account, ctx, labels),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(account, ctx, labels),
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ctx.namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        },
    ]


def _router_selector(ctx: RenderContext) -> dict[str, str]:
    return {**selector(ctx), ROLE_LABEL: ROUTER_ROLE}


def _router_deployment(spec: InferenceServiceSpec, ctx: RenderContext, name: str, account: str) -> dict:
    image, command, args = router_argv(spec, ctx)
    live, ready = HEALTH[spec.engine]
    container: dict = {"name": "router", "image": image}
    if command:
        container["command"] = command
    if args:
        container["args"] = args
    container["ports"] = [{"name": "http", "containerPort": spec.port}]
    container["resources"] = {
        "requests": {"cpu": ROUTER_CPU, "memory": ROUTER_MEMORY},
        "limits": {"memory": ROUTER_MEMORY},
    }
    container["readinessProbe"] = {
        "httpGet": {"path": ready, "port": "http"},
        "periodSeconds": 5,
        "timeoutSeconds": 3,
        "failureThreshold": 3,
    }
    container["livenessProbe"] = {
        "httpGet": {"path": live, "port": "http"},
        "initialDelaySeconds": 10,
        "periodSeconds": 15,
        "timeoutSeconds": 5,
        "failureThreshold": 4,
    }
    pod = {
        "serviceAccountName": account,
        "priorityClassName": ctx.priority_class,
        "terminationGracePeriodSeconds": spec.shutdown.termination_grace_period_s,
        "containers": [container],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(router_name(name), ctx, console_labels(spec, ctx)),
        "spec": {
            "replicas": router_replicas(spec),
            "selector": {"matchLabels": _router_selector(ctx)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {**console_labels(spec, ctx), **_router_selector(ctx)}},
                "spec": pod,
            },
        },
    }


def _router_budget(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> dict:
    """Several routers: a drain leaves at least one serving."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(router_name(name), ctx, console_labels(spec, ctx)),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": _router_selector(ctx)}},
    }


def _router_service(spec: InferenceServiceSpec, ctx: RenderContext, service: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(service, ctx, console_labels(spec, ctx)),
        "spec": {
            "type": "ClusterIP",
            "selector": _router_selector(ctx),
            "ports": [{"name": "http", "port": spec.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def router_caveats(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> list[str]:
    out = [
        f"The router ({router_replicas(spec)} replica(s) of {router_name(name)}) finds the engine pods through the "
        f"Kubernetes API with its ServiceAccount {router_name(name)} (get, list and watch pods in {ctx.namespace}); "
        "the console's own account must hold those rights to grant them."
    ]
    if spec.engine == "vllm":
        out.append(
            f"The vLLM router is the production-stack image {VLLM_ROUTER_IMAGE}; with disaggregation it labels "
            f"prefill and decode engines by their pod label '{PD_MODEL_LABEL}'."
        )
    if spec.disaggregation:
        split = spec.disaggregation
        backend = "NixlConnector (kv_both)" if spec.engine == "vllm" else f"{split.transfer_backend}"
        out.append(
            f"Prefill ({split.prefill.replicas} x {spec.pool_gpus(split.prefill)} GPUs) and decode "
            f"({split.decode.replicas} x {spec.pool_gpus(split.decode)} GPUs) move the KV cache with {backend}: "
            "without RDMA between their nodes the transfer runs over TCP and costs most of the gain."
        )
    if spec.disaggregation:
        for pool_name, role, pool in engine_pools(spec, name):
            floor = replica_floor(pool)
            if not pool.autoscaling.enabled and floor >= pool.replicas:
                out.append(f"The {role} pool's PodDisruptionBudget keeps {floor} of {pool.replicas} replicas serving.")
            if pool.autoscaling.enabled:
                out.append(
                    f"The {role} pool scales with KEDA on its engines' queue: {waiting_query(pool, ctx, pool_name)}."
                )
    return out
