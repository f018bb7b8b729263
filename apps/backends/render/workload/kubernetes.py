"""`render_kubernetes(spec, ctx)`: a training job or an inference service as Kubernetes objects.

Pure: no client, no cluster. The objects are plain dicts for server-side apply, in apply order, and every
one passes `apps.backends.render.validate` (built-ins on Kubernetes 1.31-1.35 in strict mode, custom
objects against the vendored Volcano, LeaderWorkerSet and KEDA CRDs); see `validation_errors`.
"""

from __future__ import annotations

from dataclasses import replace

from apps.backends.render.errors import RenderError
from apps.backends.render.objects import MANAGED_BY, MANAGER, QUEUE_LABEL, TENANT_LABEL
from apps.backends.render.spec import InferenceServiceSpec, Spec, TrainingJobSpec
from apps.backends.render.workload.common import (
    check_context,
    check_env_names,
    check_secret_env,
    check_spec_labels,
    object_name,
    volcano_resource_caveat,
)
from apps.backends.render.workload.context import RenderContext, RenderedWorkload
from apps.backends.render.workload.inference import inference_objects
from apps.backends.render.workload.training import training_objects


def render_kubernetes(spec: Spec, ctx: RenderContext) -> RenderedWorkload:
    """The objects for `spec` on the cluster described by `ctx`; RenderError for what it cannot express."""
    if not isinstance(spec, TrainingJobSpec | InferenceServiceSpec):
        raise TypeError(f"not a workload spec: {type(spec).__name__}")
    check_context(ctx)
    check_spec_labels(spec)
    check_env_names(spec.env)
    check_secret_env(spec)
    name = object_name(spec, ctx)
    if isinstance(spec, TrainingJobSpec):
        _check_training_fits(spec, ctx)
        objects, caveats = training_objects(spec, ctx, name)
        endpoint = ""
    else:
        spec = _on_nodes_of(spec, ctx.gpus_per_node)
        objects, caveats, endpoint = inference_objects(spec, ctx, name)
    return RenderedWorkload(objects=objects, caveats=volcano_resource_caveat(spec, ctx) + caveats, endpoint=endpoint)


def _check_training_fits(spec: TrainingJobSpec, ctx: RenderContext) -> None:
    if spec.sharing.mode == "whole" and spec.gpus_per_worker > ctx.gpus_per_node:
        raise RenderError(
            "gpus_per_worker", f"{spec.gpus_per_worker} GPUs do not fit this cluster's {ctx.gpus_per_node}-GPU nodes"
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
