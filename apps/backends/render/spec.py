"""The console's typed workload specs: what the renderers turn into Kubernetes objects or an sbatch script.

Frozen dataclasses with JSON-safe `to_dict()` and derived GPU counts; pure Python, no Django. The workloads
app builds them from user input (`apps.workloads.specs.parse_spec`, with every check and limit) and hands
them to a backend, which renders them with `apps.backends.render.workload`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

from apps.backends.shares import SHARE_UNITS
from apps.backends.types import REPLICATED, Sharing, Topology

# Pinned releases (never :latest, so a redeploy runs what was tested). Both tags are published upstream:
# vllm/vllm-openai:v0.11.0 (vLLM's own docs build FROM it) and lmsysorg/sglang:v0.5.3 (SGLang's release tag).
DEFAULT_IMAGES = {"vllm": "vllm/vllm-openai:v0.11.0", "sglang": "lmsysorg/sglang:v0.5.3"}
DEFAULT_TIERS = {"training": "training", "inference": "online-inference"}
DEFAULT_PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"  # kube-prometheus-stack's service


# --- the specs --------------------------------------------------------------------------------------------


class _Fields:
    """A flat part of a spec whose dict form is its fields, in their order."""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GpuSharing:
    """How a worker holds its GPU: whole GPUs, one MIG instance, a time-slice or MPS replica or a HAMi vGPU.

    `units` is derived at parse time (it needs the catalog): the share of one physical GPU a worker holds, in
    units of 1/SHARE_UNITS GPU (apps/backends/shares.py), exactly what quota and chargeback count (a 1g.10gb
    MIG instance is 1/7, a time-slice or MPS replica 1/replicas, a HAMi vGPU the larger of its memory and compute
    shares). `fraction` is the same as a float, for the backends' summaries.
    """

    mode: str = Sharing.WHOLE.value
    mig_profile: str = ""  # mig: e.g. "1g.10gb"
    replicas: int | None = None  # time-slice and mps: replicas per GPU the node pool advertises
    gpumem_mib: int | None = None  # hami: device memory per worker
    gpucores: int | None = None  # hami: percent of the GPU's compute
    fraction: float = 1.0  # derived, not input
    units: int = SHARE_UNITS  # derived, not input

    @property
    def share(self) -> Fraction:
        return Fraction(self.units, SHARE_UNITS)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"mode": self.mode}
        if self.mode == Sharing.MIG:
            out["mig_profile"] = self.mig_profile
        elif self.mode in REPLICATED:
            out["replicas"] = self.replicas
        elif self.mode == Sharing.HAMI:
            out["gpumem_mib"] = self.gpumem_mib
            out["gpucores"] = self.gpucores
        return out


@dataclass(frozen=True)
class Volume(_Fields):
    """A PersistentVolumeClaim mounted into every worker (data, checkpoints, weights)."""

    claim: str
    mount_path: str
    read_only: bool = False


@dataclass(frozen=True)
class Elastic(_Fields):
    """torchrun's elastic range: the job keeps running with min..max workers and resumes from checkpoints."""

    min_workers: int
    max_workers: int
    checkpoint_path: str


@dataclass(frozen=True)
class Toleration(_Fields):
    """A toleration the spec adds to its node pool's, as Kubernetes has it: `Equal` tolerates the taint with this
    key and value, `Exists` any value of the key; an empty `effect` tolerates every effect
    (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/)."""

    key: str
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True)
class SecretEnv(_Fields):
    """An environment variable whose value is one key of a Kubernetes Secret in the workload's namespace
    (env valueFrom.secretKeyRef: https://kubernetes.io/docs/concepts/configuration/secret/). The console keeps
    this reference only; the value stays in the cluster."""

    name: str  # the variable, e.g. HF_TOKEN
    secret: str  # the Secret's name
    key: str  # the key in the Secret's data


@dataclass(frozen=True)
class TrainingJobSpec:
    """A distributed training job: `workers` pods (or Slurm nodes), each running torchrun over its GPUs.

    `gang_min` is resolved at parse time (all workers, or the elastic minimum). Lists and dicts are not
    copied on access: treat them as read-only, as the frozen dataclass intends.
    """

    kind: ClassVar[str] = "training"

    name: str
    tenant: str
    queue: str
    image: str
    command: list[str]
    gpu_model: str
    tier: str = DEFAULT_TIERS["training"]
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workers: int = 1
    gpus_per_worker: int = 1
    sharing: GpuSharing = field(default_factory=GpuSharing)
    gang_min: int = 1
    topology: str = Topology.ANY.value
    max_runtime_s: int = 86_400
    elastic: Elastic | None = None
    retries: int = 3
    volumes: list[Volume] = field(default_factory=list)
    cpu: int | None = None  # cores per worker; None: the renderer's default
    memory_gib: int | None = None  # per worker; None: the renderer's default
    tolerations: list[Toleration] = field(default_factory=list)  # beside the node pool's
    secret_env: list[SecretEnv] = field(default_factory=list)
    cluster: str = ""  # where to run it (one of the queue's clusters); empty: placement picks
    # Minutes without a heartbeat after which the console's hung-job rule calls the run hung; None: no signal.
    # The console's concern only: no renderer puts it into a manifest.
    progress_timeout_minutes: int | None = None
    network: str = "auto"  # auto | rdma | tcp: how its ranks talk between nodes (render/workload/network.py)

    @property
    def gpus_per_pod(self) -> float:
        """GPUs one worker holds: whole GPUs, or the share of one GPU."""
        return self.gpus_per_worker if self.sharing.mode == Sharing.WHOLE else self.sharing.fraction

    @property
    def total_gpus(self) -> float:
        """GPUs the whole job holds (fractions of GPUs with MIG, time-slicing, MPS and HAMi)."""
        return float(self.workers * self.gpus_per_pod)

    @property
    def gang_gpus(self) -> float:
        """GPUs that must be admitted together before any worker starts."""
        return float(self.gang_min * self.gpus_per_pod)

    @property
    def units_per_pod(self) -> int:
        """One worker's share in units of 1/SHARE_UNITS GPU (exact, unlike `gpus_per_pod`)."""
        return self.gpus_per_worker * SHARE_UNITS if self.sharing.mode == Sharing.WHOLE else self.sharing.units

    @property
    def total_units(self) -> int:
        """The job's share in units of 1/SHARE_UNITS GPU: what its quota claim counts."""
        return self.workers * self.units_per_pod

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "tenant": self.tenant,
            "queue": self.queue,
            "tier": self.tier,
            "image": self.image,
            "command": list(self.command),
            "args": list(self.args),
            "env": dict(self.env),
            "workers": self.workers,
            "gpus_per_worker": self.gpus_per_worker,
            "gpu_model": self.gpu_model,
            "sharing": self.sharing.to_dict(),
            "gang_min": self.gang_min,
            "topology": self.topology,
            "max_runtime_s": self.max_runtime_s,
            "elastic": self.elastic.to_dict() if self.elastic else None,
            "retries": self.retries,
            "volumes": [v.to_dict() for v in self.volumes],
            "cpu": self.cpu,
            "memory_gib": self.memory_gib,
            "tolerations": [t.to_dict() for t in self.tolerations],
            "secret_env": [s.to_dict() for s in self.secret_env],
            **({"cluster": self.cluster} if self.cluster else {}),
            "progress_timeout_minutes": self.progress_timeout_minutes,
            # Only when set: a stored spec from before the network choice existed reads the same.
            **({"network": self.network} if self.network != "auto" else {}),
        }


@dataclass(frozen=True)
class Readiness(_Fields):
    """How long weights may take to load (initial_delay_s) and how often health is checked."""

    initial_delay_s: int = 600
    period_s: int = 10


@dataclass(frozen=True)
class Autoscaling(_Fields):
    """Replicas follow the engine's waiting-request count (KEDA + Prometheus); min 1 keeps one warm."""

    enabled: bool = False
    min_replicas: int = 1
    max_replicas: int | None = None
    waiting_threshold: int = 5  # waiting requests per replica before another replica is added
    prometheus_server_address: str = DEFAULT_PROMETHEUS


@dataclass(frozen=True)
class Shutdown(_Fields):
    """Graceful stop: drain_seconds for in-flight requests, within terminationGracePeriodSeconds."""

    termination_grace_period_s: int = 120
    drain_seconds: int = 60


@dataclass(frozen=True)
class Weights(_Fields):
    """A PVC holding the model weights (or a Hugging Face cache), mounted read-only."""

    claim: str
    mount_path: str = "/models"


@dataclass(frozen=True)
class Warm(_Fields):
    """Weights fetched ahead of the replicas: a Job downloads the model into this PVC once (a Hugging Face cache)
    and marks it complete; every replica mounts it read-only and starts once the mark is there."""

    claim: str


ROUTING = ("round-robin", "cache-aware")
TRANSFER_BACKENDS = ("nixl", "mooncake")


@dataclass(frozen=True)
class Pool:
    """One side of a prefill/decode split: its replicas, GPUs per replica (None: the service's tensor_parallel)
    and its own autoscaling on its engines' queue."""

    replicas: int = 1
    gpus_per_replica: int | None = None
    autoscaling: Autoscaling = field(default_factory=Autoscaling)

    def to_dict(self) -> dict:
        return {
            "replicas": self.replicas,
            "gpus_per_replica": self.gpus_per_replica,
            "autoscaling": self.autoscaling.to_dict(),
        }


@dataclass(frozen=True)
class Disaggregation:
    """Prefill and decode as separate pools with a router in PD mode between them; `transfer_backend` moves the
    KV cache from a prefill engine to a decode engine (SGLang's --disaggregation-transfer-backend, vLLM's KV
    connector: nixl is vLLM's NixlConnector)."""

    prefill: Pool = field(default_factory=Pool)
    decode: Pool = field(default_factory=Pool)
    transfer_backend: str = "nixl"

    def to_dict(self) -> dict:
        return {
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
            "transfer_backend": self.transfer_backend,
        }


@dataclass(frozen=True)
class InferenceServiceSpec:
    """An OpenAI-compatible serving deployment of one model with vLLM or SGLang.

    A replica needs tensor_parallel x pipeline_parallel (x data_parallel for SGLang) GPUs; when that is
    more than a node has, a replica spans `nodes_per_replica` whole nodes (a LeaderWorkerSet group on
    Kubernetes). `gpus_per_node` is the parse-time fleet shape those derived values use.
    """

    kind: ClassVar[str] = "inference"

    name: str
    tenant: str
    queue: str
    model: str
    gpu_model: str
    engine: str = "vllm"
    tier: str = DEFAULT_TIERS["inference"]
    image: str = DEFAULT_IMAGES["vllm"]
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    replicas: int = 1
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    port: int = 8000
    readiness: Readiness = field(default_factory=Readiness)
    autoscaling: Autoscaling = field(default_factory=Autoscaling)
    shutdown: Shutdown = field(default_factory=Shutdown)
    weights: Weights | None = None
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cpu: int | None = None  # cores per pod; None: the renderer's default
    memory_gib: int | None = None
    max_runtime_s: int | None = None  # None: runs until cancelled
    gpus_per_node: int = 8  # derived from parse_spec's argument, not input
    tolerations: list[Toleration] = field(default_factory=list)  # beside the node pool's
    secret_env: list[SecretEnv] = field(default_factory=list)
    cluster: str = ""  # where to run it (one of the queue's clusters); empty: placement picks
    routing: str = "round-robin"  # or "cache-aware": a router in front of the replicas
    disaggregation: Disaggregation | None = None  # prefill and decode pools behind a router in PD mode
    warm: Warm | None = None  # a Job fills a cache volume with the weights before the replicas load them
    network: str = "auto"  # auto | rdma | tcp: how a multi-node replica's ranks talk (render/workload/network.py)

    @property
    def gpus_per_replica(self) -> int:
        dp = self.data_parallel if self.engine == "sglang" else 1
        return self.tensor_parallel * self.pipeline_parallel * dp

    @property
    def routed(self) -> bool:
        """A router runs in front of the engines: cache-aware routing, or prefill/decode pools."""
        return self.routing == "cache-aware" or self.disaggregation is not None

    def pool_gpus(self, pool: Pool) -> int:
        """GPUs per replica of one disaggregated pool (one node: a pool's replica is one pod)."""
        return pool.gpus_per_replica or self.tensor_parallel

    def pools(self) -> list[tuple[str, Pool]]:
        """(role, pool) of a disaggregated service, prefill first; [] when it is not split."""
        split = self.disaggregation
        return [("prefill", split.prefill), ("decode", split.decode)] if split else []

    @property
    def nodes_per_replica(self) -> int:
        return max(1, self.gpus_per_replica // self.gpus_per_node) if self.multi_node else 1

    @property
    def multi_node(self) -> bool:
        return self.gpus_per_replica > self.gpus_per_node

    @property
    def gpus_per_pod(self) -> int:
        return self.gpus_per_replica // self.nodes_per_replica

    @property
    def total_gpus(self) -> float:
        if self.disaggregation:
            return float(sum(pool.replicas * self.pool_gpus(pool) for _, pool in self.pools()))
        return float(self.replicas * self.gpus_per_replica)

    @property
    def max_gpus(self) -> float:
        """GPUs at full scale: max_replicas with autoscaling, else the fixed replicas (per pool when split)."""
        if self.disaggregation:
            return float(sum(_top(pool.replicas, pool.autoscaling) * self.pool_gpus(pool) for _, pool in self.pools()))
        return float(_top(self.replicas, self.autoscaling) * self.gpus_per_replica)

    @property
    def gang_gpus(self) -> float:
        """One replica's GPUs must be admitted together; replicas are independent of each other."""
        if self.disaggregation:
            return float(max(self.pool_gpus(pool) for _, pool in self.pools()))
        return float(self.gpus_per_replica)

    @property
    def total_units(self) -> int:
        """The service's whole GPUs in units of 1/SHARE_UNITS GPU: what its quota claim counts."""
        return int(self.total_gpus) * SHARE_UNITS

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "tenant": self.tenant,
            "queue": self.queue,
            "tier": self.tier,
            "engine": self.engine,
            "model": self.model,
            "image": self.image,
            "gpu_model": self.gpu_model,
            "tensor_parallel": self.tensor_parallel,
            "pipeline_parallel": self.pipeline_parallel,
            "data_parallel": self.data_parallel,
            "replicas": self.replicas,
            "max_model_len": self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "port": self.port,
            "readiness": self.readiness.to_dict(),
            "autoscaling": self.autoscaling.to_dict(),
            "shutdown": self.shutdown.to_dict(),
            "weights": self.weights.to_dict() if self.weights else None,
            "extra_args": list(self.extra_args),
            "env": dict(self.env),
            "cpu": self.cpu,
            "memory_gib": self.memory_gib,
            "max_runtime_s": self.max_runtime_s,
            "tolerations": [t.to_dict() for t in self.tolerations],
            "secret_env": [s.to_dict() for s in self.secret_env],
            **({"cluster": self.cluster} if self.cluster else {}),
            # Only when set: a stored spec from before routing existed reads the same.
            **({"routing": self.routing} if self.routing != "round-robin" else {}),
            **({"disaggregation": self.disaggregation.to_dict()} if self.disaggregation else {}),
            **({"warm": self.warm.to_dict()} if self.warm else {}),
            **({"network": self.network} if self.network != "auto" else {}),
        }


def _top(replicas: int, scaling: Autoscaling) -> int:
    return max(replicas, scaling.max_replicas if scaling.enabled and scaling.max_replicas else 0)


Spec = TrainingJobSpec | InferenceServiceSpec
