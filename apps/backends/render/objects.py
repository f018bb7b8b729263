"""Small builders shared by the Kubernetes renderers: metadata, labels, quantities."""

from __future__ import annotations

from apps.backends.render.desired import QueueSpec

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "gpu-console"
# Namespaces carry these; a Kueue ClusterQueue selects its namespaces by both, since a queue name is
# unique only within its tenant.
TENANT_LABEL = "gpu-console/tenant"
QUEUE_LABEL = "gpu-console/queue"
GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
RESOURCE_QUOTA_NAME = "gpu-console-gpus"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def labels(tenant: str | None = None, queue: QueueSpec | None = None) -> dict[str, str]:
    """The console's labels: always managed-by (so the apply step can find what it owns), then tenant/queue."""
    out = {MANAGED_BY: MANAGER}
    if queue is not None:
        out[TENANT_LABEL] = queue.tenant
        out[QUEUE_LABEL] = queue.name
    elif tenant is not None:
        out[TENANT_LABEL] = tenant
    return out


def meta(name: str, *, namespace: str | None = None, label_set: dict[str, str] | None = None) -> dict:
    out: dict = {"name": name}
    if namespace is not None:
        out["namespace"] = namespace
    out["labels"] = dict(label_set or labels())
    return out


def obj(api_version: str, kind: str, metadata: dict, **body: object) -> dict:
    """A manifest with the conventional key order (apiVersion, kind, metadata, then the body)."""
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def namespace(name: str, queue: QueueSpec) -> dict:
    return obj("v1", "Namespace", meta(name, label_set=labels(queue=queue)))


def resource_quota(ns: str, queue: QueueSpec, hard: dict[str, int]) -> dict:
    """A ResourceQuota; quantities as strings, the canonical form Kubernetes stores."""
    spec = {"hard": {key: str(value) for key, value in hard.items()}}
    return obj("v1", "ResourceQuota", meta(RESOURCE_QUOTA_NAME, namespace=ns, label_set=labels(queue=queue)), spec=spec)


def weight_quantity(weight: float) -> int | str:
    """A fair-share weight as a Kubernetes quantity: an integer when whole, else a short decimal string."""
    if weight == int(weight):
        return int(weight)
    return f"{weight:.3f}".rstrip("0").rstrip(".")


def cpu_quantity(millicores: int) -> int | str:
    """Cores as a quantity: whole cores as an integer, else millicores ("1500m")."""
    return millicores // 1000 if millicores % 1000 == 0 else f"{millicores}m"


def memory_quantity(mib: int) -> int | str:
    """MiB as a quantity: 0, in Gi when whole ("512Gi"), else in Mi."""
    if mib == 0:
        return 0
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def toleration(key: str, operator: str, value: str = "", effect: str = "") -> dict:
    """A pod toleration, with value and effect only where they are set (checked by the caller)."""
    item: dict = {"key": key, "operator": operator}
    if value:
        item["value"] = value
    if effect:
        item["effect"] = effect
    return item
