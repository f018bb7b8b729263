"""The representative workloads the golden files hold, and the cluster contexts they render for."""

from __future__ import annotations

from apps.backends.catalog import catalog_by_code
from apps.backends.render.workload import RenderContext, SlurmContext
from apps.backends.render.workload.network import Fabric
from apps.workloads.specs import Spec, apply_overrides, parse_spec

CATALOG = catalog_by_code()
H100 = "NVIDIA-H100-80GB-HBM3"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}
POOL_TAINT = {"key": "gpu-console/pool", "value": "training", "effect": "NoSchedule"}

TRAINING = {
    "name": "pretrain-8b",
    "tenant": "acme",
    "queue": "train",
    "tier": "training",
    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
    "command": ["python", "-m", "train"],
    "args": ["--config", "configs/8b.yaml", "--steps", "100000"],
    "env": {"NCCL_DEBUG": "WARN", "WANDB_PROJECT": "8b"},
    "workers": 4,
    "gpus_per_worker": 8,
    "gpu_model": "h100",
    "max_runtime_s": 172_800,
    "retries": 2,
    "volumes": [
        {"claim": "datasets", "mount_path": "/data", "read_only": True},
        {"claim": "checkpoints", "mount_path": "/ckpt"},
    ],
}
SMALL = {
    "name": "finetune-lora",
    "tenant": "acme",
    "queue": "dev",
    "tier": "exploratory",
    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
    "command": ["python", "lora.py"],
    "workers": 2,
    "gpus_per_worker": 1,
    "gpu_model": "h100",
    "max_runtime_s": 3600,
}
SERVE = {
    "name": "llama-70b",
    "tenant": "acme",
    "queue": "serve",
    "engine": "vllm",
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "gpu_model": "h100",
    "tensor_parallel": 4,
    "replicas": 2,
    "max_model_len": 32768,
    "autoscaling": {"enabled": True, "min_replicas": 1, "max_replicas": 6, "waiting_threshold": 8},
    "weights": {"claim": "llama-weights", "mount_path": "/models"},
    "env": {"VLLM_LOGGING_LEVEL": "INFO"},
}
SGLANG = {
    "name": "qwen-7b",
    "tenant": "acme",
    "queue": "serve",
    "engine": "sglang",
    "model": "Qwen/Qwen2.5-7B-Instruct",
    "gpu_model": "h100",
    "tensor_parallel": 1,
    "data_parallel": 2,
    "port": 30000,
    "extra_args": ["--trust-remote-code"],
}

SGLANG = {
    "name": "qwen-7b",
    "tenant": "acme",
    "queue": "serve",
    "engine": "sglang",
    "model": "Qwen/Qwen2.5-7B-Instruct",
    "gpu_model": "h100",
    "tensor_parallel": 1,
    "data_parallel": 2,
    "port": 30000,
    "extra_args": ["--trust-remote-code"],
}

# name -> (kind, spec data, queueing or "slurm"); "<queueing>+<target>" renders for a cluster whose
# inference_target (deployment, lws, kserve) or training_target (trainjob) is that target.
CASES: dict[str, tuple[str, dict, str]] = {
    "training-4x8-h100-kueue.yaml": (
        "training",
        apply_overrides(
            TRAINING,
            {
                "tolerations": [{"key": "example.com/reserved-for", "value": "pretraining", "effect": "NoSchedule"}],
                "secret_env": [{"name": "WANDB_API_KEY", "secret": "wandb", "key": "api-key"}],
            },
        ),
        "kueue",
    ),
    "training-4x8-h100-volcano.yaml": ("training", apply_overrides(TRAINING, {"topology": "leaf"}), "volcano"),
    "training-mig-1g10gb.yaml": (
        "training",
        apply_overrides(SMALL, {"name": "notebook-eval", "sharing": {"mode": "mig", "mig_profile": "1g.10gb"}}),
        "kueue",
    ),
    "training-hami.yaml": (
        "training",
        apply_overrides(
            SMALL, {"name": "hami-debug", "sharing": {"mode": "hami", "gpumem_mib": 20480, "gpucores": 30}}
        ),
        "volcano",
    ),
    "training-mps.yaml": (
        "training",
        apply_overrides(SMALL, {"name": "rl-eval", "workers": 4, "sharing": {"mode": "mps", "replicas": 4}}),
        "kueue",
    ),
    "training-elastic.yaml": (
        "training",
        apply_overrides(
            TRAINING,
            {
                "name": "elastic-7b",
                "workers": 6,
                "elastic": {"min_workers": 2, "max_workers": 8, "checkpoint_path": "/ckpt/elastic-7b"},
            },
        ),
        "kueue",
    ),
    "vllm-tp4-autoscaling.yaml": (
        "inference",
        apply_overrides(SERVE, {"secret_env": [{"name": "HF_TOKEN", "secret": "hf-token", "key": "token"}]}),
        "kueue",
    ),
    "sglang-dp2.yaml": ("inference", SGLANG, "volcano"),
    "sglang-dp2-lws.yaml": ("inference", SGLANG, "kueue+lws"),
    "sglang-dp2-kserve-volcano.yaml": ("inference", SGLANG, "volcano+kserve"),
    "vllm-tp4-kserve.yaml": (
        "inference",
        apply_overrides(SERVE, {"secret_env": [{"name": "HF_TOKEN", "secret": "hf-token", "key": "token"}]}),
        "kueue+kserve",
    ),
    "training-4x8-h100-trainjob.yaml": (
        "training",
        apply_overrides(
            TRAINING,
            {
                "tolerations": [{"key": "example.com/reserved-for", "value": "pretraining", "effect": "NoSchedule"}],
                "secret_env": [{"name": "WANDB_API_KEY", "secret": "wandb", "key": "api-key"}],
            },
        ),
        "kueue+trainjob",
    ),
    "vllm-tp8-pp2-lws.yaml": (
        "inference",
        {
            "name": "llama-405b",
            "tenant": "acme",
            "queue": "serve",
            "model": "/models/llama-3.1-405b-instruct",
            "gpu_model": "h100",
            "tensor_parallel": 8,
            "pipeline_parallel": 2,
            "weights": {"claim": "llama-405b", "mount_path": "/models"},
            "readiness": {"initial_delay_s": 1800, "period_s": 15},
            "shutdown": {"termination_grace_period_s": 300, "drain_seconds": 240},
        },
        "kueue",
    ),
    # Routing and prefill/decode disaggregation (issue 24): both engines, cache-aware routing alone and PD.
    "vllm-cache-aware.yaml": ("inference", apply_overrides(SERVE, {"routing": "cache-aware"}), "kueue"),
    "sglang-cache-aware.yaml": (
        "inference",
        apply_overrides(SGLANG, {"routing": "cache-aware", "data_parallel": 1, "replicas": 12}),
        "volcano",
    ),
    "vllm-pd.yaml": (
        "inference",
        apply_overrides(
            SERVE,
            {
                "replicas": 1,
                "autoscaling": None,
                "disaggregation": {
                    "prefill": {"replicas": 2, "gpus_per_replica": 8},
                    "decode": {
                        "replicas": 2,
                        "autoscaling": {"enabled": True, "min_replicas": 2, "max_replicas": 8},
                    },
                    "transfer_backend": "nixl",
                },
            },
        ),
        "kueue",
    ),
    "sglang-pd.yaml": (
        "inference",
        apply_overrides(
            SGLANG,
            {
                "data_parallel": 1,
                "routing": "cache-aware",
                "disaggregation": {
                    "prefill": {
                        "replicas": 1,
                        "autoscaling": {"enabled": True, "min_replicas": 1, "max_replicas": 4, "waiting_threshold": 4},
                    },
                    "decode": {"replicas": 3, "gpus_per_replica": 2},
                },
            },
        ),
        "volcano",
    ),
    # Warm weights (issue 24): a Job fills the cache claim, the replicas wait for its marker.
    "vllm-warm.yaml": (
        "inference",
        apply_overrides(
            SERVE,
            {
                "weights": None,
                "warm": {"claim": "hf-cache"},
                "secret_env": [{"name": "HF_TOKEN", "secret": "hf-token", "key": "token"}],
            },
        ),
        "kueue",
    ),
    "sglang-warm-kserve.yaml": (
        "inference",
        apply_overrides(SGLANG, {"warm": {"claim": "hf-cache"}}),
        "volcano+kserve",
    ),
    # RDMA between nodes (issue 24): InfiniBand on Volcano, RoCE on Kueue (its RDMA resource left out of quota), a
    # multi-node LeaderWorkerSet and a TrainJob on InfiniBand, TCP on an Ethernet pool; Slurm's NCCL env and GRES.
    "training-4x8-h100-infiniband.yaml": ("training", TRAINING, "volcano"),
    "training-4x8-h100-roce.yaml": ("training", TRAINING, "kueue"),
    "training-4x8-h100-ethernet.yaml": ("training", TRAINING, "kueue"),
    "training-4x8-h100-trainjob-infiniband.yaml": ("training", TRAINING, "kueue+trainjob"),
    "vllm-tp8-pp2-lws-infiniband.yaml": (
        "inference",
        {
            "name": "llama-405b",
            "tenant": "acme",
            "queue": "serve",
            "model": "/models/llama-3.1-405b-instruct",
            "gpu_model": "h100",
            "tensor_parallel": 8,
            "pipeline_parallel": 2,
            "weights": {"claim": "llama-405b", "mount_path": "/models"},
        },
        "volcano",
    ),
    "slurm-training-infiniband.sh": ("training", TRAINING, "slurm"),
    "slurm-training.sh": ("training", TRAINING, "slurm"),
    "slurm-inference.sh": (
        "inference",
        apply_overrides(SERVE, {"autoscaling": None, "max_runtime_s": 604_800}),
        "slurm",
    ),
    "slurm-training-pyxis.sh": ("training", TRAINING, "slurm-pyxis"),
    "slurm-training-mps.sh": (
        "training",
        apply_overrides(SMALL, {"name": "rl-eval", "workers": 4, "sharing": {"mode": "mps", "replicas": 4}}),
        "slurm",
    ),
    "slurm-inference-pyxis.sh": (
        "inference",
        apply_overrides(SERVE, {"autoscaling": None, "max_runtime_s": 604_800}),
        "slurm-pyxis",
    ),
}
# The node pools' fabrics of the RDMA cases (what a platform admin declares: PATCH /api/v1/pools/<id>/).
INFINIBAND = Fabric(
    kind="infiniband",
    rdma_resource="rdma/ib",
    nccl_ib_hca="=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1",
    nccl_socket_ifname="=eth0",
    pool="h100-training",
)
ROCE = Fabric(
    kind="roce",
    rdma_resource="nvidia.com/hostdev",
    rdma_per_pod=8,
    nccl_ib_hca="mlx5",
    nccl_socket_ifname="net1",
    nccl_ib_gid_index=3,
    pod_networks="roce-hostdev",
    pool="h100-training",
)
ETHERNET = Fabric(kind="ethernet", nccl_socket_ifname="^lo,docker", pool="h100-training")
SLURM_INFINIBAND = Fabric(
    kind="infiniband", nccl_ib_hca="=mlx5_0:1,mlx5_1:1", nccl_socket_ifname="=ib0", slurm_gres="ib:1", pool="gpu"
)
# name -> what its context adds (the pool's fabric, the cluster's settings)
CONTEXTS: dict[str, dict] = {
    "training-4x8-h100-infiniband.yaml": {"fabric": INFINIBAND},
    "training-4x8-h100-roce.yaml": {"fabric": ROCE, "kueue_excluded_resources": ("nvidia.com/hostdev",)},
    "training-4x8-h100-ethernet.yaml": {"fabric": ETHERNET},
    "training-4x8-h100-trainjob-infiniband.yaml": {"fabric": INFINIBAND, "kueue_excluded_resources": ("rdma/",)},
    "vllm-tp8-pp2-lws-infiniband.yaml": {"fabric": INFINIBAND},
    "slurm-training-infiniband.sh": {"fabric": SLURM_INFINIBAND},
}

# The Slurm clusters the golden scripts render for: one that runs jobs on its nodes' own software, and one
# with pyxis/enroot whose shared file system holds the specs' volumes.
VOLUME_DIRS = {"datasets": "/lustre/datasets", "checkpoints": "/lustre/ckpt", "llama-weights": "/lustre/models/llama"}
SLURM_TARGETS = {"slurm": {}, "slurm-pyxis": {"containers": "pyxis", "volume_dirs": VOLUME_DIRS}}


def kube_context(queueing: str, spec: Spec, **overrides) -> RenderContext:
    """The modelled cluster's context; `queueing` may name a deployment target too ("kueue+kserve")."""
    queueing, _, target = queueing.partition("+")
    if target:
        key = "training_target" if target == "trainjob" else "inference_target"
        overrides = {key: target, **overrides}
    tenant_queue = f"{spec.tenant}-{spec.queue}"
    values = {
        "namespace": tenant_queue,
        "queue_name": tenant_queue,
        "priority_class": spec.tier,
        "queueing": queueing,
        "workload_id": 4242,
        "product_label": H100,
        "tolerations": [GPU_TAINT, POOL_TAINT],
        "gpus_per_node": 8,
        "preemptible": spec.tier != "online-inference",
        # the modelled cluster's GPU sharing: HAMi's device plugin on gpu=on nodes (Kueue), Volcano's vGPU one
        "hami_node_labels": {"gpu": "on"},
        "volcano_vgpu": True,
    }
    values.update(overrides)
    return RenderContext(**values)


def slurm_context(**overrides) -> SlurmContext:
    values = {
        "account": "acme_train",
        "qos": "training",
        "partition": "gpu",
        "gres_type": "a100",
        "output_dir": "/var/log/gpu-console",
        "containers": "none",  # a cluster without a container runtime (the local test cluster is one)
    }
    values.update(overrides)
    return SlurmContext(**values)


def spec_of(name: str) -> Spec:
    kind, data, _ = CASES[name]
    return parse_spec(kind, data, CATALOG)
