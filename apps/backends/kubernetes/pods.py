"""Reading pods: which workload a pod belongs to, the GPUs it holds, when it ran. Pure functions on dicts."""

from __future__ import annotations

from datetime import UTC, datetime

from apps.backends.catalog import CATALOG
from apps.backends.render.objects import MANAGED_BY, MANAGER, PRODUCT_LABEL, QUEUE_LABEL, TENANT_LABEL

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
HAMI_CORES = "nvidia.com/gpucores"
MIG_SLICES = 7
FINISHED = {"Succeeded", "Failed"}
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# A KServe predictor's pods name their InferenceService, a TrainJob's pods their JobSet (named after the TrainJob):
# both come before the Job and ReplicaSet that own the pods directly.
KSERVE_LABEL = "serving.kserve.io/inferenceservice"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
OWNER_LABELS = (
    KSERVE_LABEL,
    JOBSET_LABEL,
    "batch.kubernetes.io/job-name",
    "job-name",
    "volcano.sh/job-name",
    "leaderworkerset.sigs.k8s.io/name",
)


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def is_console(obj: dict) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == MANAGER


def owner_name(pod: dict) -> str:
    """The name of the workload object a pod belongs to (InferenceService, TrainJob's JobSet, Job, Volcano Job,
    LeaderWorkerSet, Deployment)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    for key in OWNER_LABELS:
        if labels.get(key):
            return labels[key]
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "ReplicaSet" and labels.get("pod-template-hash"):
            return ref["name"].removesuffix(f"-{labels['pod-template-hash']}")
        if ref.get("controller"):
            return ref.get("name", "")
    return meta.get("name", "")


def workload_id(pod: dict) -> str:
    """The backend id the console knows a pod's workload by: the object's name for its own workloads,
    "<namespace>/<owner>" for anyone else's."""
    name = owner_name(pod)
    return name if is_console(pod) else f"{(pod.get('metadata') or {}).get('namespace', '')}/{name}"


def is_daemonset_pod(pod: dict) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in (pod.get("metadata") or {}).get("ownerReferences") or [])


def is_mirror_pod(pod: dict) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def _number(value: object) -> float:
    text = str(value)
    try:
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        return 0.0


def is_gpu_resource(name: str) -> bool:
    """nvidia.com/gpu, or a per-model name nvidia.com/gpu-<model> (Volcano clusters); not HAMi's gpumem/gpucores."""
    return name == GPU or name.startswith(GPU + "-")


def gpu_requests(pod: dict) -> dict[str, float]:
    """nvidia.com/* resources the pod's containers request (sidecars included), by resource name."""
    out: dict[str, float] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if name.startswith("nvidia.com/"):
                out[name] = out.get(name, 0.0) + _number(value)
    return out


def gpu_share(pod: dict) -> tuple[int, float]:
    """(whole GPUs, fraction of one more GPU) the pod holds.

    nvidia.com/gpu and the per-model nvidia.com/gpu-<model> (Volcano) are whole GPUs, unless HAMi's
    nvidia.com/gpucores makes a request a vGPU (that percentage of one GPU); a MIG instance is its compute
    slices out of 7.
    """
    requests = gpu_requests(pod)
    whole = 0
    fraction = 0.0
    cores = requests.get(HAMI_CORES)
    for name, amount in requests.items():
        if is_gpu_resource(name):
            if cores is not None:
                fraction += min(cores / 100.0, 1.0) * amount
            else:
                whole += int(amount)
        elif name.startswith(MIG_PREFIX):
            profile = name.removeprefix(MIG_PREFIX)  # e.g. "3g.40gb"
            slices = int(profile.split("g", 1)[0]) if profile[:1].isdigit() else MIG_SLICES
            fraction += amount * slices / MIG_SLICES
    return whole, fraction


def gpu_amount(pod: dict) -> float:
    whole, fraction = gpu_share(pod)
    return whole + fraction


def gpu_model_of(pod: dict) -> str:
    """The GPU model a pod ran on: the product its node selector names, else the per-model resource."""
    selector = ((pod.get("spec") or {}).get("nodeSelector") or {}).get(PRODUCT_LABEL, "")
    if selector:
        return selector.removesuffix("-SHARED")
    for name in gpu_requests(pod):
        if name.startswith(GPU + "-"):
            return name.removeprefix(GPU + "-")
    return ""


def run_span(pod: dict, now: datetime) -> tuple[datetime | None, datetime | None]:
    """(start, end) of the pod's main container; end is None while it runs."""
    status = pod.get("status") or {}
    starts, ends = [], []
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if "running" in state:
            starts.append(parse_time(state["running"].get("startedAt")))
        elif "terminated" in state:
            starts.append(parse_time(state["terminated"].get("startedAt")))
            ends.append(parse_time(state["terminated"].get("finishedAt")))
    start = min((s for s in starts if s), default=None) or parse_time(status.get("startTime"))
    if start is None:
        return None, None
    if status.get("phase") in FINISHED:
        return start, max((e for e in ends if e), default=None) or now
    return start, None


def tenant_queue(pod: dict) -> tuple[str, str]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(TENANT_LABEL, ""), labels.get(QUEUE_LABEL, "")


def catalog_memory(product: str) -> int:
    """Memory of a GPU model from the console's catalog by product label (when the node lacks the label)."""
    for entry in CATALOG:
        if product in entry["product_labels"]:
            return entry["memory_mib"]
    return 0
