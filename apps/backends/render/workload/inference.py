"""Inference services on Kubernetes: a Deployment, or a LeaderWorkerSet when a replica spans nodes or the cluster's
`inference_target` is lws (a KServe InferenceService with `kserve`: kserve.py).

Both get a ClusterIP Service "<name>-api" on the serving pods (the LeaderWorkerSet controller already owns
a headless Service named after the set), a PodDisruptionBudget so that a drain never takes the service below
its min_replicas, and with autoscaling a KEDA ScaledObject on the engine's waiting-request gauge, summed over
the workload's serving pods.

Probes: a startupProbe on /health gives weight loading its generous budget (readiness.initial_delay_s)
while letting the pod become ready the moment the model is loaded; readiness then follows /health every
period, and liveness restarts an engine whose /health stops answering. A readinessProbe with a long
initialDelaySeconds would instead keep every pod out of the Service for the whole delay.
"""

from __future__ import annotations

import math
from dataclasses import replace

from apps.backends.render.spec import InferenceServiceSpec
from apps.backends.render.workload import warm
from apps.backends.render.workload.common import (
    ROLE_LABEL,
    console_labels,
    container_resources,
    cpu_memory,
    env_list,
    kube_literal,
    meta,
    network,
    network_env,
    pod_annotations,
    pod_spec_base,
    queue_labels,
    security_context,
    selector,
    sh_join,
    shm_mount,
    shm_volume,
    volcano_queue,
)
from apps.backends.render.workload.context import RenderContext
from apps.backends.render.workload.engines import (
    HEALTH_PATH,
    RAY_PORT,
    SGLANG_BOOTSTRAP_PORT,
    SGLANG_DIST_PORT,
    WAITING_METRIC,
    drain_command,
    engine_argv,
    ray_wait_for_nodes,
)

LWS_API = "leaderworkerset.x-k8s.io/v1"
KEDA_API = "keda.sh/v1alpha1"
POLLING_INTERVAL_S = 15
COOLDOWN_S = 300  # a replica costs minutes of weight loading: scale in slowly


NIXL_SIDE_CHANNEL_PORT = 5600
PD_MODEL_LABEL = "model"  # production-stack's router tells prefill from decode engines by this pod label
BOOTSTRAP_ANNOTATION = "sglang.ai/bootstrap-port"  # the SGLang router's default --bootstrap-port-annotation


def inference_objects(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> tuple[list[dict], list[str], str]:
    """(objects, caveats, endpoint) for one service."""
    service = f"{name}-api"
    if spec.routed:
        from apps.backends.render.workload.router import routed_objects, router_caveats

        objects = routed_objects(spec, ctx, name, service) + warm_objects(spec, ctx, name)
        endpoint = f"http://{service}.{ctx.namespace}.svc.{ctx.cluster_domain}:{spec.port}"
        return objects, _caveats(spec, ctx, name) + router_caveats(spec, ctx, name), endpoint
    if uses_lws(spec, ctx):
        objects = [_leader_worker_set(spec, ctx, name), _service(spec, ctx, service, "leader")]
    else:
        objects = [_deployment(spec, ctx, name), _service(spec, ctx, service, "server")]
    objects.append(_disruption_budget(spec, ctx, name))
    if spec.autoscaling.enabled:
        objects.append(_scaled_object(spec, ctx, name))
    objects += warm_objects(spec, ctx, name)
    endpoint = f"http://{service}.{ctx.namespace}.svc.{ctx.cluster_domain}:{spec.port}"
    return objects, _caveats(spec, ctx, name), endpoint


def warm_objects(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> list[dict]:
    """The Job that warms the weights (warm.py), after the service's own objects: the backend follows the first
    workload object of a rendering as the workload."""
    return [warm.warm_job(spec, ctx, name)] if spec.warm else []


def uses_lws(spec: InferenceServiceSpec, ctx: RenderContext) -> bool:
    """A LeaderWorkerSet: a replica spans nodes (the only way to run one), or the cluster asks for LWS. A routed
    service's engines are single-node Deployments behind the router, whatever the target."""
    return not spec.routed and (spec.multi_node or ctx.inference_target == "lws")


def _env(spec: InferenceServiceSpec, ctx: RenderContext) -> dict[str, str]:
    env = network_env(spec, ctx)
    if spec.warm:
        env.update(warm.engine_env())  # the cache the warm Job filled
    elif spec.weights and not spec.model.startswith("/"):
        # A Hugging Face id with a weights volume: the volume is a pre-filled, read-only HF cache.
        env.update({"HF_HOME": spec.weights.mount_path, "HF_HUB_OFFLINE": "1"})
    env.update(spec.env)  # the user's values win (e.g. HF_HUB_OFFLINE=0 to allow downloads)
    return env


def _http_get() -> dict:
    return {"path": HEALTH_PATH, "port": "http"}


def _probes(spec: InferenceServiceSpec) -> dict:
    period = spec.readiness.period_s
    return {
        "startupProbe": {
            "httpGet": _http_get(),
            "periodSeconds": period,
            "timeoutSeconds": 5,
            "failureThreshold": max(1, math.ceil(spec.readiness.initial_delay_s / period)),
        },
        "readinessProbe": {
            "httpGet": _http_get(),
            "periodSeconds": period,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": _http_get(),
            "periodSeconds": 15,
            "timeoutSeconds": 10,
            "failureThreshold": 4,
        },
    }


def _container(
    spec: InferenceServiceSpec, ctx: RenderContext, command: list[str], *, serving: bool, pd_role: str | None = None
) -> dict:
    """The engine container; `command` is as the kubelet must see it (already through kube_literal)."""
    container: dict = {"name": "engine", "image": spec.image, "command": command}
    env = _env(spec, ctx)
    if env or spec.secret_env:
        container["env"] = env_list(env, spec.secret_env)
    if serving:
        container["ports"] = [{"name": "http", "containerPort": spec.port}, *_pd_ports(spec, pd_role)]
    container["resources"] = container_resources(spec, ctx)
    if (security := security_context(spec, ctx)) is not None:
        container["securityContext"] = security
    if serving:
        container.update(_probes(spec))
        container["lifecycle"] = {"preStop": {"exec": {"command": drain_command(spec)}}}
    mounts = [shm_mount()]
    if spec.weights:
        mounts.append({"name": "weights", "mountPath": spec.weights.mount_path, "readOnly": True})
    if spec.warm:
        mounts.append(warm.mount(read_only=True))
    container["volumeMounts"] = mounts
    return container


def _pod_spec(spec: InferenceServiceSpec, ctx: RenderContext, container: dict) -> dict:
    pod = pod_spec_base(spec, ctx, volcano_scheduler=True)
    pod["terminationGracePeriodSeconds"] = spec.shutdown.termination_grace_period_s
    if spec.warm:
        pod["initContainers"] = [warm.wait_container(spec)]
    pod["containers"] = [container]
    volumes = [shm_volume(cpu_memory(spec)[1])]
    if spec.weights:
        volumes.append(
            {"name": "weights", "persistentVolumeClaim": {"claimName": spec.weights.claim, "readOnly": True}}
        )
    if spec.warm:
        volumes.append(warm.volume(spec, read_only=True))
    pod["volumes"] = volumes
    return pod


def _pd_ports(spec: InferenceServiceSpec, pd_role: str | None) -> list[dict]:
    """The ports a disaggregated engine opens beside its API (engines.py: PD flags)."""
    if pd_role is None:
        return []
    if spec.engine == "sglang":
        return [{"name": "bootstrap", "containerPort": SGLANG_BOOTSTRAP_PORT}] if pd_role == "prefill" else []
    return [{"name": "nixl", "containerPort": NIXL_SIDE_CHANNEL_PORT}]


def _pod_metadata(
    spec: InferenceServiceSpec, ctx: RenderContext, role: str, *, queue_annotation: bool, pd_role: str | None = None
) -> dict:
    labels = {**console_labels(spec, ctx), **selector(ctx), ROLE_LABEL: role}
    annotations = pod_annotations(spec, ctx, queue_annotation=queue_annotation)
    if pd_role and spec.engine == "vllm":
        labels[PD_MODEL_LABEL] = pd_role  # --prefill-model-labels / --decode-model-labels
    if pd_role == "prefill" and spec.engine == "sglang":
        annotations[BOOTSTRAP_ANNOTATION] = str(SGLANG_BOOTSTRAP_PORT)
    metadata: dict = {"labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def engine_selector(spec: InferenceServiceSpec, ctx: RenderContext, role: str) -> dict[str, str]:
    """The pods of one engine Deployment: the workload's, and with a router (whose pods share the workload label)
    also their role, so that no two Deployments' selectors overlap."""
    return {**selector(ctx), ROLE_LABEL: role} if spec.routed else selector(ctx)


def pool_spec(spec: InferenceServiceSpec, role: str) -> InferenceServiceSpec:
    """The service as one disaggregated pool sees it: its replicas, tensor parallel size and autoscaling."""
    pool = dict(spec.pools())[role]
    return replace(
        spec,
        tensor_parallel=spec.pool_gpus(pool),
        pipeline_parallel=1,
        data_parallel=1,
        replicas=pool.replicas,
        autoscaling=pool.autoscaling,
    )


def engine_objects(spec: InferenceServiceSpec, ctx: RenderContext, name: str, role: str) -> list[dict]:
    """A single-node engine Deployment of a routed service (role server, prefill or decode), its disruption
    budget and its ScaledObject."""
    pd_role = role if role in ("prefill", "decode") else None
    objects = [_deployment(spec, ctx, name, role, pd_role=pd_role), _disruption_budget(spec, ctx, name, role)]
    if spec.autoscaling.enabled:
        objects.append(_scaled_object(spec, ctx, name))
    return objects


def _deployment(
    spec: InferenceServiceSpec, ctx: RenderContext, name: str, role: str = "server", *, pd_role: str | None = None
) -> dict:
    body: dict = {}
    if not spec.autoscaling.enabled:
        body["replicas"] = spec.replicas  # with KEDA the HPA owns replicas; an applied value would fight it
    body["selector"] = {"matchLabels": engine_selector(spec, ctx, role)}
    # Surge one replica before taking one down: a new engine loads its weights while the old one serves.
    body["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    argv = engine_argv(spec, pd_role=pd_role)
    container = _container(spec, ctx, [kube_literal(arg) for arg in argv], serving=True, pd_role=pd_role)
    body["template"] = {
        "metadata": _pod_metadata(spec, ctx, role, queue_annotation=True, pd_role=pd_role),
        "spec": _pod_spec(spec, ctx, container),
    }
    labels = {**console_labels(spec, ctx), **queue_labels(ctx)}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(name, ctx, labels), "spec": body}


def _multi_node_commands(spec: InferenceServiceSpec) -> tuple[list[str], list[str]]:
    """(leader command, worker command) for one replica group of `nodes_per_replica` pods.

    SGLang: the same launch_server on every pod, rank and leader address from LeaderWorkerSet's
    environment through the kubelet's $(VAR) expansion (the only unescaped '$(' in the command).
    vLLM: a Ray cluster per group, the head on the leader; once every worker has joined, vLLM starts there
    with the Ray executor. That needs a shell; every user value in it is one shell-quoted word.
    """
    if spec.engine == "sglang":
        argv = engine_argv(spec)
        core = [kube_literal(arg) for arg in argv[: len(argv) - len(spec.extra_args)]]
        dist = ["--nnodes", "$(LWS_GROUP_SIZE)", "--node-rank", "$(LWS_WORKER_INDEX)"]
        dist += ["--dist-init-addr", f"$(LWS_LEADER_ADDRESS):{SGLANG_DIST_PORT}"]
        command = [*core, *dist, *(kube_literal(arg) for arg in spec.extra_args)]
        return command, command
    leader = (
        "set -eu\n"
        f"ray start --head --port={RAY_PORT} --disable-usage-stats\n"
        + ray_wait_for_nodes("LWS_GROUP_SIZE")
        + "exec "
        + sh_join(engine_argv(spec, ray=True))
        + "\n"
    )
    # The head may not be up yet: retry until it accepts this node, then stay in the foreground.
    worker = (
        f'until ray start --address="$LWS_LEADER_ADDRESS:{RAY_PORT}" --disable-usage-stats --block; do\n'
        "  sleep 5\n"
        "done\n"
    )
    return ["/bin/bash", "-c", kube_literal(leader)], ["/bin/bash", "-c", kube_literal(worker)]


def _leader_worker_set(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> dict:
    if spec.multi_node:
        leader_cmd, worker_cmd = _multi_node_commands(spec)
        leader = _container(spec, ctx, leader_cmd, serving=True)
        worker = _container(spec, ctx, worker_cmd, serving=False)
        template: dict = {
            "size": spec.nodes_per_replica,
            # A group is one model instance: when any of its pods restarts, the whole group restarts together.
            "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": {
                "metadata": _pod_metadata(spec, ctx, "leader", queue_annotation=False),
                "spec": _pod_spec(spec, ctx, leader),
            },
            "workerTemplate": {
                "metadata": _pod_metadata(spec, ctx, "worker", queue_annotation=False),
                "spec": _pod_spec(spec, ctx, worker),
            },
        }
    else:
        # inference_target lws with one pod per replica: groups of one, whose only pod (the leader, from the
        # worker template when there is no leader template) runs the engine as a Deployment's pod would.
        container = _container(spec, ctx, [kube_literal(arg) for arg in engine_argv(spec)], serving=True)
        template = {
            "size": 1,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "workerTemplate": {
                "metadata": _pod_metadata(spec, ctx, "leader", queue_annotation=False),
                "spec": _pod_spec(spec, ctx, container),
            },
        }
    body: dict = {}
    if not spec.autoscaling.enabled:
        body["replicas"] = spec.replicas
    body["startupPolicy"] = "LeaderCreated"
    body["leaderWorkerTemplate"] = template
    labels = {**console_labels(spec, ctx), **queue_labels(ctx)}
    annotations = {"scheduling.volcano.sh/queue-name": volcano_queue(spec, ctx)} if ctx.queueing == "volcano" else None
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": meta(name, ctx, labels, annotations),
        "spec": body,
    }


def _service(spec: InferenceServiceSpec, ctx: RenderContext, name: str, role: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, ctx, console_labels(spec, ctx)),
        "spec": {
            "type": "ClusterIP",
            "selector": {**selector(ctx), ROLE_LABEL: role},
            "ports": [{"name": "http", "port": spec.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def replica_floor(spec: InferenceServiceSpec) -> int:
    """Replicas a drain must leave serving: the spec's min_replicas (autoscaling's floor), at most its replicas
    when the count is fixed."""
    floor = spec.autoscaling.min_replicas
    return floor if spec.autoscaling.enabled else min(floor, spec.replicas)


def _disruption_budget(spec: InferenceServiceSpec, ctx: RenderContext, name: str, role: str = "server") -> dict:
    """A policy/v1 PodDisruptionBudget: evictions (a drain, the cluster autoscaler) leave `replica_floor` replicas.

    An eviction is refused when fewer than minAvailable selected pods would stay available
    (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/). A Deployment's replica is one pod. A
    LeaderWorkerSet's replica is a group, and evicting any pod of it, leader or worker, recreates the whole group
    (restartPolicy RecreateGroupOnPodRestart,
    https://github.com/kubernetes-sigs/lws/blob/main/docs/examples/sample/README.md), so the budget covers every
    pod of the set and keeps floor x group size of them available: a budget on leaders alone would let a drain
    evict the workers of every group. An integer minAvailable is what a budget over pods of any controller takes
    (https://kubernetes.io/docs/tasks/run-application/configure-pdb/#arbitrary-controllers-and-selectors).
    """
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(name, ctx, console_labels(spec, ctx)),
        "spec": {
            "minAvailable": replica_floor(spec) * spec.nodes_per_replica,
            "selector": {"matchLabels": engine_selector(spec, ctx, role)},
        },
    }


def waiting_query(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> str:
    """PromQL: the engine's waiting requests summed over this workload's serving pods.

    Pods are matched by name as scraped (namespace and pod labels): a Deployment's are
    "<name>-<template hash>-<suffix>", LeaderWorkerSet leaders "<name>-<group>" (workers serve no HTTP).
    The patterns cannot match another workload's pods, whose names have a different number of parts.
    """
    pods = f"{name}-[0-9]+" if uses_lws(spec, ctx) else f"{name}-[a-z0-9]+-[a-z0-9]+"
    return f'sum({WAITING_METRIC[spec.engine]}{{namespace="{ctx.namespace}",pod=~"{pods}"}})'


def _scaled_object(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> dict:
    """KEDA: replicas = ceil(waiting / threshold) within min..max; min >= 1 keeps a warm replica."""
    target = (
        {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "name": name}
        if uses_lws(spec, ctx)
        else {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    )
    scaling = spec.autoscaling
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": meta(name, ctx, console_labels(spec, ctx)),
        "spec": {
            "scaleTargetRef": target,
            "minReplicaCount": scaling.min_replicas,
            "maxReplicaCount": scaling.max_replicas,
            "pollingInterval": POLLING_INTERVAL_S,
            "cooldownPeriod": COOLDOWN_S,
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": scaling.prometheus_server_address,
                        "query": waiting_query(spec, ctx, name),
                        "threshold": str(scaling.waiting_threshold),
                    },
                }
            ],
        },
    }


def _caveats(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> list[str]:
    out = warm.caveats(spec, name)
    if ctx.queueing == "kueue":
        kind = "leaderworkerset.x-k8s.io/leaderworkerset" if uses_lws(spec, ctx) else "deployment (with pod)"
        out.append(
            f"Kueue manages this service only with its {kind} integration enabled; it admits the pods' cpu, "
            f"memory and GPU requests against the ClusterQueue's ResourceFlavor '{spec.gpu_model}'."
        )
    elif spec.multi_node:
        out.append(
            "Volcano gang-schedules each LeaderWorkerSet group only when the LWS controller runs with "
            "gangSchedulingManagement.schedulerProvider: volcano."
        )
    if spec.multi_node and spec.engine == "vllm":
        out.append(f"Multi-node vLLM runs a Ray cluster per group (the head on the leader, port {RAY_PORT}).")
        if spec.tensor_parallel > spec.gpus_per_pod and network(spec, ctx).transport != "rdma":
            out.append(
                "Tensor parallelism across nodes is slow without InfiniBand/RoCE: prefer tensor_parallel within a "
                "node and pipeline_parallel across nodes."
            )
    if spec.disaggregation:
        return out  # each pool's budget and autoscaling: router.router_caveats
    floor = replica_floor(spec)
    if not spec.autoscaling.enabled and floor >= spec.replicas:
        out.append(
            f"The PodDisruptionBudget keeps {floor} of {spec.replicas} replicas serving: a drain of a node that runs "
            "one waits (the console's drain reports it) until more replicas run elsewhere."
        )
    elif spec.multi_node:
        out.append(
            f"The PodDisruptionBudget counts pods ({floor} x {spec.nodes_per_replica}): a group whose leader is still "
            "loading counts its ready workers."
        )
    if spec.autoscaling.enabled:
        out.append(
            "Autoscaling needs KEDA and a Prometheus that scrapes the engine pods' /metrics with namespace and "
            f"pod labels; the trigger's query is {waiting_query(spec, ctx, name)}."
        )
    return out
