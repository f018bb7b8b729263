"""Desired states for the renderer tests: one representative cluster and helpers to vary it."""

from __future__ import annotations

from dataclasses import replace

from apps.backends.render.desired import DesiredState, GpuModelRef, QueueSpec, QuotaLine, TenantSpec, TierSpec

GPU_MODELS = (
    GpuModelRef(code="h100", name="H100-80GB-HBM3", product_label="NVIDIA-H100-80GB-HBM3", slurm_gres_type="h100"),
    GpuModelRef(code="a100", name="A100-SXM4-80GB", product_label="NVIDIA-A100-SXM4-80GB", slurm_gres_type="a100"),
    GpuModelRef(code="l40s", name="L40S", product_label="NVIDIA-L40S", slurm_gres_type="l40s"),
)

# The four seeded tiers (issue 4): online-inference never borrows and is never preempted.
TIERS = (
    TierSpec("online-inference", 1000, preemptible=False, may_borrow=False, description="Serving; never preempted"),
    TierSpec("periodic", 800, preemptible=True, may_borrow=True, description="Scheduled batch; reclaimable"),
    TierSpec("training", 500, preemptible=True, may_borrow=True, description="Training runs"),
    TierSpec("exploratory", 100, preemptible=True, may_borrow=True, description="Notebooks; preempted first"),
)

# Two organizations; research nests three levels of teams (research > vision > vision-3d > nerf).
TENANTS = (
    TenantSpec("research", "Research", None, {"h100": 24, "a100": 12, "l40s": 8}, weight=2.0),
    TenantSpec("vision", "Vision", "research", {"h100": 16, "a100": 12, "l40s": 8}),
    TenantSpec("vision-3d", "Vision 3D", "vision", {"a100": 4, "l40s": 8}),
    TenantSpec("nerf", "NeRF", "vision-3d", {"a100": 4, "l40s": 8}, weight=1.5),
    TenantSpec("nlp", "NLP", "research", {"h100": 8}),
    TenantSpec("product", "Product", None, {"h100": 8, "l40s": 16}),
    TenantSpec("serving", "Serving", "product", {"h100": 8, "l40s": 16}),
)

QUEUES = (
    QueueSpec(
        tenant="vision",
        name="train",
        namespaces=("vision-train",),
        slurm_account="vision_train",
        quotas=(
            QuotaLine("h100", guaranteed=16, borrow_limit=8, lend_limit=12),
            QuotaLine("a100", guaranteed=8),  # borrow unlimited, lends everything
        ),
        users=("alice", "bob"),
    ),
    QueueSpec(
        tenant="nerf",
        name="exp",
        namespaces=("nerf-dev", "nerf-batch"),
        slurm_account="nerf_exp",
        quotas=(
            QuotaLine("a100", guaranteed=4, borrow_limit=4, weight=2.0, per_user_limit=2),
            QuotaLine("l40s", guaranteed=8, lend_limit=4),
        ),
        users=("carol",),
    ),
    QueueSpec(
        tenant="nlp",
        name="finetune",
        namespaces=("nlp",),
        slurm_account="nlp_ft",
        quotas=(QuotaLine("h100", guaranteed=8, borrow_limit=0, lend_limit=0),),  # fully private
        users=("erin", "dave"),
    ),
    QueueSpec(
        tenant="serving",
        name="online",
        namespaces=("serving-prod",),
        slurm_account="",  # served on Kubernetes only
        quotas=(
            QuotaLine("h100", guaranteed=8, borrow_limit=0, lend_limit=0),
            QuotaLine("l40s", guaranteed=16, borrow_limit=0, lend_limit=8),
        ),
    ),
)


def representative_state(queueing: str = "kueue", cluster: str = "gpu-east") -> DesiredState:
    return DesiredState(
        cluster=cluster, tenants=TENANTS, queues=QUEUES, tiers=TIERS, gpu_models=GPU_MODELS, queueing=queueing
    )


def with_queues(state: DesiredState, *queues: QueueSpec) -> DesiredState:
    return replace(state, queues=queues)


def reversed_state(state: DesiredState) -> DesiredState:
    """The same state with every collection in reverse order (as another database query might return it)."""
    return replace(
        state,
        tenants=tuple(reversed(state.tenants)),
        queues=tuple(
            replace(q, quotas=tuple(reversed(q.quotas)), namespaces=tuple(reversed(q.namespaces)), users=q.users[::-1])
            for q in reversed(state.queues)
        ),
        tiers=tuple(reversed(state.tiers)),
    )
