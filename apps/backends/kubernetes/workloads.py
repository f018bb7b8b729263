"""Workloads on Kubernetes: what to apply for a WorkloadSpec, and the console's state of what runs.

`render_workload` renders the console's typed spec with `apps.backends.render.workload.render_kubernetes`,
in the context the console passed (namespace, queue, tier, product label, taints) and the cluster's own
settings (queueing, node size, deployment targets). `objects_for` takes that rendering, or the objects a caller
rendered already, and validates them strictly before anything is applied. `workload_status` maps a Job, a Volcano
Job, a Kubeflow TrainJob, a Deployment, a LeaderWorkerSet or a KServe InferenceService plus its pods and warning
events onto WorkloadStatus. Pure functions.
"""

from __future__ import annotations

from datetime import UTC, datetime

from apps.backends.base import PermanentBackendError
from apps.backends.kubernetes import pods as podinfo
from apps.backends.render.spec import Spec
from apps.backends.render.workload import (
    RenderedWorkload,
    WorkloadContext,
    kubernetes_context,
    render_kubernetes,
    validation_errors,
)
from apps.backends.types import BackendState, Placement, ReplicaStart, WorkloadSpec, WorkloadStatus

EVENTS_SHOWN = 5
DEADLINE_EXCEEDED = "DeadlineExceeded"  # a Job condition's and a pod's reason when activeDeadlineSeconds passed


def render_workload(spec: Spec, context: WorkloadContext, settings: dict) -> RenderedWorkload:
    """The objects for `spec` on a cluster with these connection settings (RenderError for what it cannot express)."""
    return render_kubernetes(spec, kubernetes_context(context, settings))


def objects_for(spec: WorkloadSpec, settings: dict, cluster: str, schema_version: str) -> list[dict]:
    """The objects to apply for `spec`, validated strictly against `schema_version` (PermanentBackendError
    with every problem)."""
    manifest = spec.manifest
    if isinstance(manifest, RenderedWorkload):
        rendered = manifest
    elif isinstance(manifest, list):
        rendered = RenderedWorkload(objects=manifest)
    elif manifest is not None:
        raise PermanentBackendError(f"{spec.name}: a Kubernetes manifest is a list of objects, not {type(manifest)}")
    elif spec.source is None or spec.context is None:
        raise PermanentBackendError(
            f"{spec.name}: nothing to apply: a Kubernetes workload needs the console's spec and its render context"
        )
    else:
        try:
            rendered = render_workload(spec.source, spec.context, settings)
        except (ValueError, TypeError) as exc:  # RenderError is a ValueError
            raise PermanentBackendError(f"cannot render {spec.name} for {cluster}: {exc}") from exc
    if not rendered.objects:
        raise PermanentBackendError(f"{spec.name}: nothing to apply")
    errors = validation_errors(rendered, (schema_version,))
    if errors:
        raise PermanentBackendError(f"{spec.name}: the rendered objects would be refused: " + "; ".join(errors[:10]))
    return rendered.objects


# --- status -----------------------------------------------------------------------------------------------


def _true_conditions(obj: dict) -> dict[str, dict]:
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}


def _pending_reason(pods: list[dict], events: list[str]) -> str:
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return condition.get("message") or condition.get("reason") or ""
    return events[-1] if events else ""


KUEUE_GATE = "kueue.x-k8s.io/admission"
TRAINJOB_API = "trainer.kubeflow.org/v1alpha1"
KSERVE_API = "serving.kserve.io/v1beta1"  # the scheduling gate Kueue holds a queued pod with until it admits it


def waiting_for_kueue(obj: dict, pods: list[dict]) -> bool:
    """A suspended Job or TrainJob, or a service whose pods Kueue still gates."""
    if (obj.get("apiVersion"), obj.get("kind")) in (("batch/v1", "Job"), (TRAINJOB_API, "TrainJob")):
        return bool((obj.get("spec") or {}).get("suspend"))
    return any(g.get("name") == KUEUE_GATE for p in pods for g in (p.get("spec") or {}).get("schedulingGates") or [])


def quota_reserved_message(workload: dict) -> str:
    """Kueue's reason a Workload holds no quota (its QuotaReserved=False condition), '' otherwise."""
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "QuotaReserved" and condition.get("status") == "False":
            return condition.get("message") or condition.get("reason") or ""
    return ""


def workload_status(
    backend_id: str, obj: dict, pods: list[dict], events: list[str], kueue_wait: str = ""
) -> WorkloadStatus:
    """The console's view of one workload object and its pods (`events`: "reason: message", oldest first;
    `kueue_wait`: why Kueue has not admitted it yet, from its Kueue Workload)."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    by_node: dict[str, Placement] = {}
    for pod in running:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            by_node.setdefault(node, Placement(node=node, gpu_indexes=[]))
    placements = [by_node[n] for n in sorted(by_node)]
    starts = [podinfo.run_span(p, datetime.now(UTC))[0] for p in pods]
    started = min((s for s in starts if s), default=None)
    out = WorkloadStatus(
        backend_id=backend_id,
        state=BackendState.PENDING,
        placements=placements,
        events=events[-EVENTS_SHOWN:],
        replica_starts=replica_starts(pods),
    )
    out.started_at = started
    if meta.get("deletionTimestamp"):
        out.state, out.reason = BackendState.CANCELLED, "deleted: its pods are stopping"
        out.finished_at = podinfo.parse_time(meta["deletionTimestamp"])
        return out
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    if api_version == TRAINJOB_API and kind == "TrainJob":
        _trainjob_state(out, obj, running, pods, events, kueue_wait)
    elif api_version == KSERVE_API and kind == "InferenceService":
        _inference_service_state(out, obj, pods, events, kueue_wait)
    elif api_version == "batch/v1" and kind == "Job":
        conditions = _true_conditions(obj)
        if "Complete" in conditions:
            out.state, out.finished_at = BackendState.SUCCEEDED, podinfo.parse_time(status.get("completionTime"))
        elif "Failed" in conditions:
            failed = conditions["Failed"]
            # activeDeadlineSeconds (the max runtime) passed: the Job controller fails it with reason
            # DeadlineExceeded (https://kubernetes.io/docs/concepts/workloads/controllers/job/#job-termination-and-cleanup).
            deadline = failed.get("reason") == DEADLINE_EXCEEDED
            out.state = BackendState.TIMED_OUT if deadline else BackendState.FAILED
            out.reason = f"{failed.get('reason', 'Failed')}: {failed.get('message', '')}".rstrip(": ")
            out.finished_at = podinfo.parse_time(failed.get("lastTransitionTime"))
        elif spec.get("suspend"):
            detail = kueue_wait or (events[-1] if events else "")
            out.reason = "suspended until Kueue admits it" + (f" ({detail})" if detail else "")
        elif running:
            out.state = BackendState.RUNNING
        else:
            out.reason = _pending_reason(pods, events) or "waiting for its pods to start"
    elif api_version.startswith("batch.volcano.sh/"):
        phase = (status.get("state") or {}).get("phase", "Pending")
        message = (status.get("state") or {}).get("message", "")
        mapping = {
            "Running": BackendState.RUNNING,
            "Completing": BackendState.RUNNING,
            "Completed": BackendState.SUCCEEDED,
            "Failed": BackendState.FAILED,
            "Terminated": BackendState.FAILED,
            "Aborted": BackendState.CANCELLED,
            "Aborting": BackendState.CANCELLED,
        }
        out.state = mapping.get(phase, BackendState.PENDING)
        if out.state == BackendState.FAILED and any(
            (p.get("status") or {}).get("reason") == DEADLINE_EXCEEDED for p in pods
        ):
            # A Volcano Job has no deadline of its own: each pod carries the max runtime as activeDeadlineSeconds,
            # and the kubelet fails a pod past it with reason DeadlineExceeded
            # (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#lifecycle).
            out.state = BackendState.TIMED_OUT
        if out.state.finished:
            out.finished_at = podinfo.parse_time((status.get("state") or {}).get("lastTransitionTime"))
            out.reason = f"Volcano job {phase}" + (f": {message}" if message else "")
        elif out.state == BackendState.PENDING:
            out.reason = f"Volcano job {phase}" + (f": {_pending_reason(pods, events)}" if pods or events else "")
    else:  # Deployment, LeaderWorkerSet: a service runs while at least one replica serves
        ready = status.get("availableReplicas") if kind == "Deployment" else status.get("readyReplicas")
        if ready:
            out.state = BackendState.RUNNING
            wanted = spec.get("replicas", 1)
            if ready < wanted:
                out.reason = f"{ready} of {wanted} replicas ready"
        elif kueue_wait:
            out.reason = f"waiting for Kueue to admit it ({kueue_wait})"
        else:
            out.reason = _pending_reason(pods, events) or "no replica is ready yet"
    return out


LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def replica_starts(pods: list[dict]) -> list[ReplicaStart]:
    """Each engine pod's cold start: from its PodScheduled condition turning True (bound to a node) to its Ready
    condition turning True (its startup and readiness probes passed: it serves), ready None while it is not
    (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-conditions). Engine pods are the ones
    holding GPUs (not a router's, not the warm-weights Job's); of a multi-node LeaderWorkerSet group, its leader."""
    out = []
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if podinfo.gpu_amount(pod) <= 0 or labels.get(LWS_WORKER_INDEX, "0") != "0":
            continue
        scheduled = _pod_condition(pod, "PodScheduled")
        if scheduled.get("status") != "True" or not scheduled.get("lastTransitionTime"):
            continue
        ready = _pod_condition(pod, "Ready")
        out.append(
            ReplicaStart(
                replica=pod["metadata"]["name"],
                node=(pod.get("spec") or {}).get("nodeName", ""),
                scheduled_at=podinfo.parse_time(scheduled["lastTransitionTime"]),
                ready_at=podinfo.parse_time(ready.get("lastTransitionTime")) if ready.get("status") == "True" else None,
            )
        )
    return out


def _pod_condition(pod: dict, kind: str) -> dict:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _trainjob_state(
    out: WorkloadStatus, obj: dict, running: list[dict], pods: list[dict], events: list[str], kueue_wait: str
) -> None:
    """A TrainJob by its conditions (Complete / Failed, which the Trainer sets from its JobSet), else suspended
    (waiting for Kueue) or running once a pod runs."""
    conditions = _true_conditions(obj)
    if "Complete" in conditions:
        out.state = BackendState.SUCCEEDED
        out.finished_at = podinfo.parse_time(conditions["Complete"].get("lastTransitionTime"))
    elif "Failed" in conditions:
        failed = conditions["Failed"]
        out.state = BackendState.FAILED
        out.reason = f"{failed.get('reason', 'Failed')}: {failed.get('message', '')}".rstrip(": ")
        out.finished_at = podinfo.parse_time(failed.get("lastTransitionTime"))
    elif (obj.get("spec") or {}).get("suspend"):
        detail = kueue_wait or (events[-1] if events else "")
        out.reason = "suspended until Kueue admits it" + (f" ({detail})" if detail else "")
    elif running:
        out.state = BackendState.RUNNING
    else:
        out.reason = _pending_reason(pods, events) or "waiting for its pods to start"


def _inference_service_state(
    out: WorkloadStatus, obj: dict, pods: list[dict], events: list[str], kueue_wait: str
) -> None:
    """An InferenceService runs while its Ready condition is True (KServe sets it from the predictor's readiness;
    it then serves at status.url, the rendering's endpoint); otherwise Kueue's wait, why its pods wait, or the
    condition's message (e.g. ServerlessModeRejected)."""
    ready = _condition(obj, "Ready")
    if ready.get("status") == "True":
        out.state = BackendState.RUNNING
    elif kueue_wait:
        out.reason = f"waiting for Kueue to admit it ({kueue_wait})"
    else:
        detail = ready.get("message") or ready.get("reason") or ""
        out.reason = _pending_reason(pods, events) or detail or "KServe has not reported it ready yet"


def event_lines(events: list[dict]) -> list[str]:
    """ "reason: message" per distinct event, oldest first (a repeated event counts once, at its latest)."""
    ordered = sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    lines = [f"{e.get('reason', '')}: {e.get('message', '')}".strip(": ") for e in ordered]
    return list(reversed(dict.fromkeys(reversed(lines))))


# --- usage -------------------------------------------------------------------------------------------------


def usage_entries(pods: list[dict], now: datetime) -> list[dict]:
    """JSON-safe usage per GPU-holding pod that has started: what a cancellation keeps."""
    out = []
    for pod in pods:
        amount = podinfo.gpu_amount(pod)
        start, end = podinfo.run_span(pod, now)
        if not amount or start is None:
            continue
        tenant, queue = podinfo.tenant_queue(pod)
        out.append(
            {
                "backend_id": podinfo.owner_name(pod),
                "tenant": tenant,
                "queue": queue,
                "gpu_model": podinfo.gpu_model_of(pod),
                "gpus": amount,
                "start": start.isoformat(),
                "end": (end or now).isoformat(),
            }
        )
    return out
