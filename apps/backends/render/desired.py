"""The console's quota model as plain values: the input of the quota renderers and of `Backend.push_quota`.

Built from the database by `apps.tenancy.desired_state.build_desired_state()` (tenancy owns the tables);
the renderers in `apps/backends/render/` turn it into Kubernetes objects (Kueue or Volcano) or Slurm
sacctmgr operations, and each backend pushes what they render. No Django here, so renderers are pure
functions with golden-file tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuModelRef:
    code: str  # console code, e.g. "h100"
    name: str  # e.g. "H100-80GB-HBM3"
    product_label: str  # nvidia.com/gpu.product value, e.g. "NVIDIA-H100-80GB-HBM3"
    slurm_gres_type: str  # GRES type on Slurm nodes, e.g. "h100"


@dataclass(frozen=True)
class TierSpec:
    name: str  # e.g. "online-inference"
    value: int  # priority value, e.g. 1000
    preemptible: bool
    may_borrow: bool
    description: str = ""


@dataclass(frozen=True)
class QuotaLine:
    """One queue's quota for one GPU model. None means: borrow unlimited / lend all of the unused guarantee."""

    gpu_model: str  # GpuModelRef.code
    guaranteed: int
    borrow_limit: int | None = None
    lend_limit: int | None = None
    weight: float = 1.0
    per_user_limit: int | None = None


@dataclass(frozen=True)
class TenantSpec:
    slug: str
    name: str
    parent: str | None  # parent slug; None for an organization
    # Sum of the tenant's own queues' and descendants' guarantees per model (informational for renderers).
    guaranteed: dict[str, int] = field(default_factory=dict)
    weight: float = 1.0


@dataclass(frozen=True)
class QueueSpec:
    tenant: str  # tenant slug
    name: str  # queue name, DNS-1123, unique within the tenant
    namespaces: tuple[str, ...] = ()  # Kubernetes namespaces bound on this cluster
    slurm_account: str = ""  # Slurm account bound on this cluster
    quotas: tuple[QuotaLine, ...] = ()
    users: tuple[str, ...] = ()  # usernames allowed to submit (Slurm user associations)

    @property
    def full_name(self) -> str:
        """Cluster-unique name for cluster-scoped objects: "<tenant>-<queue>"."""
        return f"{self.tenant}-{self.name}"


@dataclass(frozen=True)
class DesiredState:
    """Everything one cluster should hold for the console's tenants, queues, quotas and tiers."""

    cluster: str
    tenants: tuple[TenantSpec, ...]
    queues: tuple[QueueSpec, ...]
    tiers: tuple[TierSpec, ...]
    gpu_models: tuple[GpuModelRef, ...]
    queueing: str = "kueue"  # Kubernetes clusters: "kueue" or "volcano"; Slurm ignores it
