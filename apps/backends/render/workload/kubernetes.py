"""`render_kubernetes(spec, ctx)`: a training job or an inference service as Kubernetes objects.

Pure: no client, no cluster. The objects are plain dicts for server-side apply, in apply order, and every
one passes `apps.backends.render.validate` (built-ins on Kubernetes 1.31-1.35 in strict mode, custom
objects against the vendored Volcano, LeaderWorkerSet, KEDA, KServe and Kubeflow Trainer CRDs); see
`validation_errors`. What a service or a job becomes is the cluster's `inference_target` / `training_target`
(RenderContext): Deployment / LeaderWorkerSet (inference.py) or InferenceService (kserve.py); Kueue Job or
Volcano Job (training.py) or TrainJob (trainjob.py).
"""

from __future__ import annotations

from dataclasses import replace

from apps.backends.render.errors import RenderError
from apps.backends.render.objects import MANAGED_BY, MANAGER, QUEUE_LABEL, TENANT_LABEL
from apps.backends.render.pools import (
    HAMI,
    MIG_PREFIX,
    mig_resource,
    pool_name,
    replicated_labels,
    replicated_prefix,
)
from apps.backends.render.spec import InferenceServiceSpec, Spec, TrainingJobSpec
from apps.backends.render.workload.common import (
    check_context,
    check_env_names,
    check_secret_env,
    check_spec_labels,
    network,
    object_name,
    sharing_pool,
    volcano_resource_caveat,
)
from apps.backends.render.workload.context import RenderContext, RenderedWorkload
from apps.backends.render.workload.inference import inference_objects
from apps.backends.render.workload.kserve import kserve_objects
from apps.backends.render.workload.training import training_objects
from apps.backends.render.workload.trainjob import trainjob_objects
from apps.backends.types import REPLICATED, Sharing


def render_kubernetes(spec: Spec, ctx: RenderContext) -> RenderedWorkload:
    """The objects for `spec` on the cluster described by `ctx`; RenderError for what it cannot express."""
    if not isinstance(spec, TrainingJobSpec | InferenceServiceSpec):
        raise TypeError(f"not a workload spec: {type(spec).__name__}")
    check_context(ctx)
    check_spec_labels(spec)
    check_env_names(spec.env)
    check_secret_env(spec)
    name = object_name(spec, ctx)
    if isinstance(spec, InferenceServiceSpec):
        spec = _on_nodes_of(spec, ctx.gpus_per_node)
    network_caveats = _network_caveats(spec, ctx)
    if isinstance(spec, TrainingJobSpec):
        _check_training_fits(spec, ctx)
        if ctx.training == "trainjob":
            objects, caveats = trainjob_objects(spec, ctx, name)
        else:
            objects, caveats = training_objects(spec, ctx, name)
        endpoint = ""
    else:
        if ctx.inference_target == "kserve":
            _check_kserve_unrouted(spec)
            objects, caveats, endpoint = kserve_objects(spec, ctx, name)
        else:
            _check_routed_fits(spec, ctx)
            objects, caveats, endpoint = inference_objects(spec, ctx, name)
    caveats = volcano_resource_caveat(spec, ctx) + caveats + network_caveats
    return RenderedWorkload(objects=objects, caveats=caveats, endpoint=endpoint)


def _network_caveats(spec: Spec, ctx: RenderContext) -> list[str]:
    """What the pool's fabric gives the workload (network.py), and what the cluster must provide for it. An RDMA
    resource on a Kueue cluster must be left out of quota (kueue_excluded_resources): Kueue admits a workload only
    when its ClusterQueue covers every resource the pods request, and the console's ClusterQueues cover GPUs, cpu and
    memory (https://kueue.sigs.k8s.io/docs/tasks/manage/administer_cluster_quotas/#exclude-arbitrary-resources-in-quota-management)."""
    plan = network(spec, ctx)
    if not plan.transport:
        return []
    nccl = ", ".join(f"{name}={value}" for name, value in plan.env.items())
    if plan.transport == "tcp":
        out = [f"TCP ({plan.why}): NCCL talks over sockets ({nccl})."]
    else:
        out = [f"RDMA ({plan.why}): {nccl}."]
        for resource, count in plan.resources.items():
            if ctx.queueing == "kueue" and not any(resource.startswith(p) for p in ctx.kueue_excluded_resources):
                raise RenderError(
                    "network",
                    f"RDMA pods request {resource}, which this cluster's Kueue would never admit: its ClusterQueues do "
                    f"not cover it. The site's Kueue Configuration must list it (or a prefix such as "
                    f"'{resource.split('/')[0]}/') in resources.excludeResourcePrefixes, and the cluster's "
                    "kueue_excluded_resources setting the same; or submit with network tcp",
                )
            out.append(
                f"Each pod requests {count} {resource}: kube-scheduler places a pod only on a node whose RDMA device "
                "plugin advertises that much free."
            )
        out.append(
            "The containers add the IPC_LOCK capability (RDMA pins memory), which the Pod Security Standards' "
            "baseline and restricted levels refuse: the namespace's pod-security level must be privileged."
        )
    if plan.pod_networks:
        out.append(
            f"Multus attaches the pool's networks ({plan.pod_networks}, annotation k8s.v1.cni.cncf.io/networks): "
            "their NetworkAttachmentDefinitions must exist (a name without a namespace in the pod's own)."
        )
    return out


def _check_training_fits(spec: TrainingJobSpec, ctx: RenderContext) -> None:
    if spec.sharing.mode == "whole" and spec.gpus_per_worker > ctx.gpus_per_node:
        raise RenderError(
            "gpus_per_worker", f"{spec.gpus_per_worker} GPUs do not fit this cluster's {ctx.gpus_per_node}-GPU nodes"
        )
    _check_pool(spec, ctx)


def _check_pool(spec: TrainingJobSpec, ctx: RenderContext) -> None:
    """A shared GPU needs its pool on the cluster: refuse by name what no quota object covers and no node runs."""
    if ctx.gpu_pools is None:
        return
    sharing, model, product = spec.sharing, spec.gpu_model, ctx.product_label
    if sharing.mode in REPLICATED and sharing_pool(spec) not in ctx.gpu_pools:
        have = [p for p in ctx.gpu_pools if p.startswith(replicated_prefix(model, sharing.mode))]
        labels = ", ".join(f"{k}={v}" for k, v in replicated_labels(product, sharing.mode, sharing.replicas))
        what = "time-sliced" if sharing.mode == Sharing.TIME_SLICE else "MPS"
        raise RenderError(
            "sharing.replicas",
            f"this cluster's inventory has no {what} {model} pool with {sharing.replicas} replicas per GPU "
            f"(nodes labelled {labels}); it has {', '.join(have) or 'none'}",
        )
    if sharing.mode == Sharing.MIG and mig_resource(sharing.mig_profile) not in ctx.gpu_pools:
        have = [p.removeprefix(MIG_PREFIX) for p in ctx.gpu_pools if p.startswith(MIG_PREFIX)]
        raise RenderError(
            "sharing.mig_profile",
            f"no {model} node of this cluster advertises MIG instances {sharing.mig_profile} (GPU Feature "
            f"Discovery's nvidia.com/mig-{sharing.mig_profile}.count, the device plugin's mixed strategy); it has "
            f"{', '.join(have) or 'none'}",
        )
    if sharing.mode == Sharing.HAMI and ctx.queueing == "kueue" and pool_name(model, HAMI) not in ctx.gpu_pools:
        labels = ", ".join(f"{k}={v}" for k, v in ctx.hami_node_labels.items())
        where = (
            f"the HAMi node labels {labels} (setting hami_node_labels)"
            if labels
            else ("HAMi node labels: the cluster's setting hami_node_labels names none")
        )
        raise RenderError(
            "sharing.mode", f"no {model} node of this cluster carries {where}, so no Kueue flavor covers its vGPUs"
        )


def _on_nodes_of(spec: InferenceServiceSpec, gpus_per_node: int) -> InferenceServiceSpec:
    """The spec laid out on this cluster's node size (it was parsed for a possibly different one)."""
    if spec.gpus_per_node == gpus_per_node:
        return spec
    gpus = spec.gpus_per_replica
    if gpus > gpus_per_node and gpus % gpus_per_node:
        raise RenderError(
            "tensor_parallel",
            f"{gpus} GPUs per replica cannot be laid out on whole {gpus_per_node}-GPU nodes of this cluster",
        )
    return replace(spec, gpus_per_node=gpus_per_node)


def _check_kserve_unrouted(spec: InferenceServiceSpec) -> None:
    """A KServe target renders one InferenceService, whose predictor KServe routes to itself: the engine's own
    router and prefill/decode pools are rendered for `inference_target` deployment or lws only."""
    field = "disaggregation" if spec.disaggregation else "routing" if spec.routing != "round-robin" else ""
    if field:
        raise RenderError(
            field,
            f"{field} is rendered as the engine's router in front of Deployments: this cluster's inference_target "
            "is kserve (one InferenceService); use a cluster whose inference_target is deployment or lws",
        )


def _check_routed_fits(spec: InferenceServiceSpec, ctx: RenderContext) -> None:
    """A router sends each request to one engine pod: every routed replica (a pool's too) fits one of this
    cluster's nodes (the spec was checked for the node size it was parsed for)."""
    if spec.routing != "round-robin" and not spec.disaggregation and spec.multi_node:
        raise RenderError(
            "routing",
            f"cache-aware routing runs replicas of one node: {spec.gpus_per_replica} GPUs per replica span this "
            f"cluster's {ctx.gpus_per_node}-GPU nodes",
        )
    for role, pool in spec.pools():
        if spec.pool_gpus(pool) > ctx.gpus_per_node:
            raise RenderError(
                f"disaggregation.{role}.gpus_per_replica",
                f"a {role} replica of {spec.pool_gpus(pool)} GPUs does not fit this cluster's "
                f"{ctx.gpus_per_node}-GPU nodes",
            )


def validation_errors(rendered: RenderedWorkload, versions: tuple[str, ...] | None = None) -> list[str]:
    """Strict validation of a rendering, with its namespace as context.

    The validator checks that a namespaced object's Namespace is part of the set; a workload lives in a
    namespace the quota renderer owns, so a stand-in Namespace goes first and is not part of the output.
    """
    from apps.backends.render.validate import K8S_VERSIONS, validate_objects

    namespaces = sorted({o["metadata"]["namespace"] for o in rendered.objects if o["metadata"].get("namespace")})
    labels = rendered.objects[0]["metadata"]["labels"] if rendered.objects else {}
    stand_ins = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": ns,
                "labels": {
                    MANAGED_BY: MANAGER,
                    TENANT_LABEL: labels.get(TENANT_LABEL, ""),
                    QUEUE_LABEL: labels.get(QUEUE_LABEL, ""),
                },
            },
        }
        for ns in namespaces
    ]
    return validate_objects(stand_ins + rendered.objects, versions or K8S_VERSIONS)
