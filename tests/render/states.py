"""Desired states for the renderer tests: one representative cluster and helpers to vary it."""

from __future__ import annotations

from dataclasses import replace

from apps.backends.render.desired import (
    DesiredState,
    GpuModelRef,
    NodeRef,
    QueueSpec,
    QuotaLine,
    QuotaSettings,
    TenantSpec,
    TierSpec,
)

GPU_MODELS = (
    GpuModelRef("h100", "H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3", "h100", memory_mib=81559),
    GpuModelRef("a100", "A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB", "a100", memory_mib=81920),
    GpuModelRef("l40s", "L40S", "NVIDIA-L40S", "l40s", memory_mib=46068),
)


def gpu_node(name: str, product: str, gpus: int, cores: int, memory_gib: int, **labels: str) -> NodeRef:
    """A node as the inventory has it: GPU Feature Discovery's labels, allocatable cpu and memory."""
    base = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus)}
    return NodeRef(name, {**base, **labels}, gpus=gpus, cpu_cores=cores, memory_mib=memory_gib * 1024)


# The modelled cluster: H100 nodes; A100 nodes with MIG (the device plugin's mixed strategy) and a HAMi one;
# L40S nodes whole, time-sliced and shared with MPS (4 replicas per GPU, GFD's "-SHARED" product label: the two
# shared nodes differ only in nvidia.com/gpu.sharing-strategy).
NODES = (
    gpu_node("h100-01", "NVIDIA-H100-80GB-HBM3", 8, 192, 1536),
    gpu_node("h100-02", "NVIDIA-H100-80GB-HBM3", 8, 192, 1536),
    gpu_node(
        "a100-01",
        "NVIDIA-A100-SXM4-80GB",
        8,
        128,
        1024,
        **{
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig-1g.10gb.count": "14",
            "nvidia.com/mig-3g.40gb.count": "4",
        },
    ),
    gpu_node("a100-02", "NVIDIA-A100-SXM4-80GB", 8, 128, 1024),
    gpu_node("a100-hami-01", "NVIDIA-A100-SXM4-80GB", 8, 128, 1024, gpu="on"),
    gpu_node("l40s-01", "NVIDIA-L40S", 4, 64, 512),
    gpu_node(
        "l40s-ts-01",
        "NVIDIA-L40S-SHARED",
        4,
        64,
        512,
        **{"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
    ),
    gpu_node(
        "l40s-mps-01",
        "NVIDIA-L40S-SHARED",
        4,
        64,
        512,
        **{"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "mps"},
    ),
)
SETTINGS = QuotaSettings(hami_node_labels=(("gpu", "on"),))

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
        cluster=cluster,
        tenants=TENANTS,
        queues=QUEUES,
        tiers=TIERS,
        gpu_models=GPU_MODELS,
        queueing=queueing,
        nodes=NODES,
        settings=SETTINGS,
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
        nodes=tuple(reversed(state.nodes)),
    )
