"""Workloads on Kubernetes: what to apply for a WorkloadSpec, and the console's state of what runs.

`objects_for` takes the manifest the console rendered for the workload (the outbox attaches it, see
`apps.workloads.rendering.kubernetes_rendering`) or, for a bare WorkloadSpec (tests, scripts), renders a
training job itself with `apps.backends.render.workload.render_kubernetes`. `workload_status` maps a Job, a
Volcano Job, a Deployment or a LeaderWorkerSet plus its pods and warning events onto WorkloadStatus.
Pure functions except `render_context` (it reads the queue's namespace binding and the GPU model).
"""

from __future__ import annotations

from datetime import UTC, datetime

from apps.backends.base import PermanentBackendError
from apps.backends.kubernetes import pods as podinfo
from apps.backends.types import Placement, Sharing, WorkloadSpec, WorkloadState, WorkloadStatus

EVENTS_SHOWN = 5
KIND_LABEL = "gpu-console/kind"


def objects_for(spec: WorkloadSpec, cluster, schema_version: str) -> list[dict]:
    """The objects to apply for `spec`, validated strictly against `schema_version` (PermanentBackendError
    with every problem)."""
    from apps.backends.render.workload import RenderedWorkload, RenderError, render_kubernetes, validation_errors

    manifest = spec.manifest
    if isinstance(manifest, RenderedWorkload):
        rendered = manifest
    elif isinstance(manifest, list):
        rendered = RenderedWorkload(objects=manifest)
    elif manifest is None:
        try:
            rendered = render_kubernetes(training_spec(spec), render_context(spec, cluster))
        except (RenderError, ValueError) as exc:
            raise PermanentBackendError(f"cluster {cluster.name}: cannot render {spec.name}: {exc}") from exc
    else:
        raise PermanentBackendError(f"{spec.name}: a Kubernetes manifest is a list of objects, not {type(manifest)}")
    if not rendered.objects:
        raise PermanentBackendError(f"{spec.name}: nothing to apply")
    errors = validation_errors(rendered, (schema_version,))
    if errors:
        raise PermanentBackendError(f"{spec.name}: the rendered objects would be refused: " + "; ".join(errors[:10]))
    return rendered.objects


def training_spec(spec: WorkloadSpec):
    """A TrainingJobSpec for a bare WorkloadSpec (an inference service needs the console's rendering)."""
    from apps.backends.render.spec import GpuSharing, TrainingJobSpec

    if spec.labels.get(KIND_LABEL) == "inference":
        raise PermanentBackendError(f"{spec.name}: an inference service needs its rendered manifest")
    if not spec.image or not spec.command:
        raise PermanentBackendError(f"{spec.name}: a training job on Kubernetes needs an image and a command")
    if not spec.gpu_model:
        raise PermanentBackendError(f"{spec.name}: a training job on Kubernetes needs a GPU model")
    sharing = GpuSharing()
    if spec.sharing == Sharing.MIG:
        sharing = GpuSharing(mode=Sharing.MIG.value, mig_profile=spec.mig_profile, fraction=spec.gpu_fraction)
    elif spec.sharing == Sharing.TIME_SLICE:
        replicas = max(2, round(1 / spec.gpu_fraction)) if spec.gpu_fraction else 2
        sharing = GpuSharing(mode=Sharing.TIME_SLICE.value, replicas=replicas, fraction=spec.gpu_fraction)
    elif spec.sharing == Sharing.HAMI:
        cores = max(1, min(100, round(spec.gpu_fraction * 100)))
        sharing = GpuSharing(mode=Sharing.HAMI.value, gpumem_mib=1024, gpucores=cores, fraction=spec.gpu_fraction)
    return TrainingJobSpec(
        name=spec.name,
        tenant=spec.tenant,
        queue=spec.queue,
        image=spec.image,
        command=list(spec.command),
        gpu_model=spec.gpu_model,
        tier=spec.tier,
        workers=spec.workers,
        gpus_per_worker=spec.gpus_per_worker,
        sharing=sharing,
        gang_min=spec.gang_min or spec.workers,
        topology=spec.topology.value,
        max_runtime_s=spec.duration_s or 86_400,
        retries=0,
    )


def render_context(spec: WorkloadSpec, cluster):
    """Where the job goes: the queue's first bound namespace (else the tenant's), its tier, the pool's taints."""
    from apps.backends.render.workload import RenderContext
    from apps.fleet.catalog import catalog_by_code
    from apps.fleet.models import GpuModel, NodePool
    from apps.tenancy.models import QueueBinding

    settings = cluster.connection or {}
    binding = QueueBinding.objects.filter(
        cluster=cluster, queue__tenant__slug=spec.tenant, queue__name=spec.queue
    ).first()
    namespace = ((binding.namespaces if binding else None) or [spec.tenant])[0]
    model = GpuModel.objects.filter(code=spec.gpu_model).first()
    labels = (
        list(model.product_labels) if model else catalog_by_code().get(spec.gpu_model, {}).get("product_labels", [])
    )
    if not labels:
        raise PermanentBackendError(f"{spec.name}: GPU model {spec.gpu_model!r} has no nvidia.com/gpu.product label")
    pool = NodePool.objects.filter(cluster=cluster, gpu_model__code=spec.gpu_model).first()
    return RenderContext(
        namespace=namespace,
        queue_name=f"{spec.tenant}-{spec.queue}",
        priority_class=spec.tier,
        queueing=settings.get("queueing", "kueue"),
        workload_id=spec.name,
        product_label=labels[0],
        tolerations=list(pool.taints) if pool else [],
        gpus_per_node=int(settings.get("gpus_per_node", 8)),
        name=spec.name,
    )


# --- status -----------------------------------------------------------------------------------------------


def _true_conditions(obj: dict) -> dict[str, dict]:
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}


def _pending_reason(pods: list[dict], events: list[str]) -> str:
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return condition.get("message") or condition.get("reason") or ""
    return events[-1] if events else ""


def workload_status(backend_id: str, obj: dict, pods: list[dict], events: list[str]) -> WorkloadStatus:
    """The console's view of one workload object and its pods (`events`: "reason: message", oldest first)."""
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
        backend_id=backend_id, state=WorkloadState.PENDING, placements=placements, events=events[-EVENTS_SHOWN:]
    )
    out.started_at = started
    if meta.get("deletionTimestamp"):
        out.state, out.reason = WorkloadState.CANCELLED, "deleted: its pods are stopping"
        out.finished_at = podinfo.parse_time(meta["deletionTimestamp"])
        return out
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    if api_version == "batch/v1" and kind == "Job":
        conditions = _true_conditions(obj)
        if "Complete" in conditions:
            out.state, out.finished_at = WorkloadState.SUCCEEDED, podinfo.parse_time(status.get("completionTime"))
        elif "Failed" in conditions:
            failed = conditions["Failed"]
            out.state = WorkloadState.FAILED
            out.reason = f"{failed.get('reason', 'Failed')}: {failed.get('message', '')}".rstrip(": ")
            out.finished_at = podinfo.parse_time(failed.get("lastTransitionTime"))
        elif spec.get("suspend"):
            out.reason = "suspended until Kueue admits it" + (f" ({events[-1]})" if events else "")
        elif running:
            out.state = WorkloadState.RUNNING
        else:
            out.reason = _pending_reason(pods, events) or "waiting for its pods to start"
    elif api_version.startswith("batch.volcano.sh/"):
        phase = (status.get("state") or {}).get("phase", "Pending")
        message = (status.get("state") or {}).get("message", "")
        mapping = {
            "Running": WorkloadState.RUNNING,
            "Completing": WorkloadState.RUNNING,
            "Completed": WorkloadState.SUCCEEDED,
            "Failed": WorkloadState.FAILED,
            "Terminated": WorkloadState.FAILED,
            "Aborted": WorkloadState.CANCELLED,
            "Aborting": WorkloadState.CANCELLED,
        }
        out.state = mapping.get(phase, WorkloadState.PENDING)
        if out.state.finished:
            out.finished_at = podinfo.parse_time((status.get("state") or {}).get("lastTransitionTime"))
            out.reason = f"Volcano job {phase}" + (f": {message}" if message else "")
        elif out.state == WorkloadState.PENDING:
            out.reason = f"Volcano job {phase}" + (f": {_pending_reason(pods, events)}" if pods or events else "")
    else:  # Deployment, LeaderWorkerSet: a service runs while at least one replica serves
        ready = status.get("availableReplicas") if kind == "Deployment" else status.get("readyReplicas")
        if ready:
            out.state = WorkloadState.RUNNING
            wanted = spec.get("replicas", 1)
            if ready < wanted:
                out.reason = f"{ready} of {wanted} replicas ready"
        else:
            out.reason = _pending_reason(pods, events) or "no replica is ready yet"
    return out


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
