"""Inference services as a KServe InferenceService (serving.kserve.io/v1beta1), for `inference_target: kserve`.

One InferenceService in RawDeployment mode (annotation `serving.kserve.io/deploymentMode: RawDeployment`; KServe
0.17 calls it Standard and still accepts the old name): KServe creates the predictor's Deployment and Service
`<name>-predictor` itself (https://kserve.github.io/website/docs/admin-guide/kubernetes-deployment/). Serverless
mode needs Knative and scales on request concurrency, which says little about an LLM engine's load.

The predictor is a custom container (`spec.predictor.containers`, the serving container named `kserve-container`:
https://kserve.github.io/website/docs/model-serving/predictive-inference/frameworks/custom-predictor/), running
the same vLLM or SGLang command, probes, resources and volumes as the Deployment renderer's engine. Not a
ServingRuntime: KServe's Hugging Face runtime runs vLLM inside KServe's own server with its own flags, and SGLang
has no KServe runtime, so a runtime would not run the spec's engine as written.

Replicas: `minReplicas` / `maxReplicas` (the spec's autoscaling bounds, or its fixed replicas). With autoscaling,
KServe's KEDA integration (`serving.kserve.io/autoscalerClass: keda` and `predictor.autoScaling.metrics`, an External
Prometheus metric: https://kserve.github.io/website/docs/model-serving/generative-inference/autoscaling/) scales on
the engine's waiting requests, the trigger the Deployment renderer gives KEDA directly.

Queueing: Kueue has no KServe integration (kubernetes-sigs/kueue#1603). The predictor's pods carry the LocalQueue
and priority labels (`predictor.labels` go on the pods) and Kueue's pod integration admits each of them as it does
a Deployment's pods. With Volcano the pods name Volcano's scheduler and their queue, as a Deployment's do.

Multi-node replicas are refused: KServe runs them only through the Hugging Face runtime's Ray `workerSpec`.
"""

from __future__ import annotations

from apps.backends.render.errors import RenderError
from apps.backends.render.spec import InferenceServiceSpec
from apps.backends.render.workload import warm
from apps.backends.render.workload.common import (
    ROLE_LABEL,
    console_labels,
    kube_literal,
    meta,
    pod_annotations,
    queue_labels,
    selector,
)
from apps.backends.render.workload.context import RenderContext
from apps.backends.render.workload.engines import WAITING_METRIC, engine_argv
from apps.backends.render.workload.inference import (
    _container,
    _disruption_budget,
    _pod_spec,
    replica_floor,
    warm_objects,
)

KSERVE_API = "serving.kserve.io/v1beta1"
CONTAINER = "kserve-container"
DEPLOYMENT_MODE = "serving.kserve.io/deploymentMode"
AUTOSCALER_CLASS = "serving.kserve.io/autoscalerClass"


def kserve_objects(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> tuple[list[dict], list[str], str]:
    """(objects, caveats, endpoint) for one service on a KServe cluster."""
    if spec.multi_node:
        raise RenderError(
            "inference_target",
            f"a replica of {spec.gpus_per_replica} GPUs spans {spec.nodes_per_replica} nodes: KServe serves that only "
            "through its Hugging Face runtime's Ray workerSpec, not the spec's engine command; this cluster's "
            "inference_target kserve cannot run it (inference_target lws can)",
        )
    objects = [_inference_service(spec, ctx, name), _disruption_budget(spec, ctx, name), *warm_objects(spec, ctx, name)]
    endpoint = f"http://{name}-predictor.{ctx.namespace}.svc.{ctx.cluster_domain}"
    return objects, _caveats(spec, ctx, name), endpoint


def predictor_query(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> str:
    """PromQL: the engine's waiting requests over the predictor's pods ("<name>-predictor-<hash>-<suffix>")."""
    pods = f"{name}-predictor-[a-z0-9]+-[a-z0-9]+"
    return f'sum({WAITING_METRIC[spec.engine]}{{namespace="{ctx.namespace}",pod=~"{pods}"}})'


def _inference_service(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> dict:
    container = _container(spec, ctx, [kube_literal(arg) for arg in engine_argv(spec)], serving=True)
    container["name"] = CONTAINER
    pod = _pod_spec(spec, ctx, container)
    scaling = spec.autoscaling
    predictor: dict = {
        "minReplicas": scaling.min_replicas if scaling.enabled else spec.replicas,
        "maxReplicas": scaling.max_replicas if scaling.enabled else spec.replicas,
    }
    if scaling.enabled:
        predictor["autoScaling"] = {
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {
                            "backend": "prometheus",
                            "serverAddress": scaling.prometheus_server_address,
                            "query": predictor_query(spec, ctx, name),
                        },
                        "target": {"type": "AverageValue", "averageValue": str(scaling.waiting_threshold)},
                    },
                }
            ]
        }
    # What KServe puts on the predictor's pods: the console's labels (status and usage find them by these), and
    # Kueue's queue and priority labels for its pod integration.
    predictor["labels"] = {**console_labels(spec, ctx), **selector(ctx), ROLE_LABEL: "server", **queue_labels(ctx)}
    annotations = pod_annotations(spec, ctx, queue_annotation=True)
    if annotations:
        predictor["annotations"] = annotations
    predictor.update(pod)
    isvc_annotations = {DEPLOYMENT_MODE: "RawDeployment"}
    if scaling.enabled:
        isvc_annotations[AUTOSCALER_CLASS] = "keda"
    return {
        "apiVersion": KSERVE_API,
        "kind": "InferenceService",
        "metadata": meta(name, ctx, console_labels(spec, ctx), isvc_annotations),
        "spec": {"predictor": predictor},
    }


def _caveats(spec: InferenceServiceSpec, ctx: RenderContext, name: str) -> list[str]:
    out = [
        *warm.caveats(spec, name),
        "KServe runs this InferenceService in RawDeployment mode (a Deployment and Service named "
        f"{name}-predictor, created by KServe's controller); the cluster's KServe must allow that mode (KServe 0.17 "
        "calls it Standard and accepts the old name).",
    ]
    if ctx.queueing == "kueue":
        out.append(
            "Kueue has no KServe integration (kubernetes-sigs/kueue#1603): the predictor's pods carry the "
            "LocalQueue label and Kueue's pod integration admits each pod on its own (Kueue's 'pod' framework must "
            "be enabled); it counts their cpu, memory and GPU requests against the ClusterQueue's ResourceFlavor "
            f"'{spec.gpu_model}'."
        )
    floor = replica_floor(spec)
    if not spec.autoscaling.enabled and floor >= spec.replicas:
        out.append(
            f"The PodDisruptionBudget keeps {floor} of {spec.replicas} replicas serving: a drain of a node that runs "
            "one waits (the console's drain reports it) until more replicas run elsewhere."
        )
    if spec.autoscaling.enabled:
        out.append(
            "Autoscaling goes through KServe's KEDA integration (autoscalerClass keda, which creates the "
            "ScaledObject): the cluster needs KEDA and a Prometheus that scrapes the predictor pods' /metrics with "
            f"namespace and pod labels; the trigger's query is {predictor_query(spec, ctx, name)}."
        )
    return out
