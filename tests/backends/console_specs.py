"""What the console hands a backend's `submit`: a typed training spec with the render context its tables would
give, as one WorkloadSpec (real backends render them; the simulator runs the summary)."""

from __future__ import annotations

from apps.backends.render.spec import GpuSharing, TrainingJobSpec
from apps.backends.render.workload import WorkloadContext
from apps.backends.types import WorkloadSpec
from apps.workloads.specs import to_backend_spec

# nvidia.com/gpu.product of the catalog's models the backend tests use
PRODUCT_LABELS = {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB"}


def console_spec(
    name: str,
    *,
    tenant: str = "team-a",
    queue: str = "train",
    gpu_model: str = "h100",
    command: list[str] | tuple[str, ...] = ("sleep", "60"),
    image: str = "busybox:1.36",
    workers: int = 1,
    gpus_per_worker: int = 1,
    max_runtime_s: int = 3600,
    retries: int = 0,
    tier: str = "training",
    priority: int = 500,
    sharing: GpuSharing | None = None,
    topology: str = "any",
    namespace: str = "",
    slurm_account: str = "",
    tolerations: list[dict] | None = None,
    labels: dict[str, str] | None = None,
) -> WorkloadSpec:
    """A training job `name` (also its backend name and workload id) in `tenant`/`queue`, rendered in the queue's
    `namespace` (default: the tenant's) or under `slurm_account`."""
    spec = TrainingJobSpec(
        name=name,
        tenant=tenant,
        queue=queue,
        image=image,
        command=list(command),
        gpu_model=gpu_model,
        tier=tier,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        sharing=sharing or GpuSharing(),
        gang_min=workers,
        topology=topology,
        max_runtime_s=max_runtime_s,
        retries=retries,
    )
    out = to_backend_spec(spec, priority)
    out.labels.update(labels or {})
    out.context = WorkloadContext(
        name=name,
        workload_id=name,
        queue=f"{tenant}-{queue}",
        tier=tier,
        gpu_model=gpu_model,
        product_label=PRODUCT_LABELS.get(gpu_model, gpu_model),
        namespace=namespace or tenant,
        tolerations=list(tolerations or []),
        slurm_account=slurm_account,
    )
    return out
