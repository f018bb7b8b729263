"""Typed values that cross the backend interface. Plain dataclasses: no Django, no network."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apps.backends.render.spec import Spec
    from apps.backends.render.workload.context import WorkloadContext

# Labels the console puts on an inference service's WorkloadSpec, so a backend can describe the service's engine
# without parsing its command line (the simulator serves the engine's /metrics from them).
KIND_LABEL = "gpu-console/kind"
ENGINE_LABEL = "gpu-console/engine"  # vllm | sglang
ENGINES_LABEL = "gpu-console/engines"  # a disaggregated service's engines (prefill + decode replicas)
MIN_REPLICAS_LABEL = "gpu-console/min-replicas"  # these three only when autoscaling is on
MAX_REPLICAS_LABEL = "gpu-console/max-replicas"
WAITING_THRESHOLD_LABEL = "gpu-console/waiting-threshold"
WARM_LABEL = "gpu-console/warm"  # "1": a Job downloads the weights into a cache volume the replicas load from
# Simulator behaviours (apps/backends/simulator/specs.py), in seconds into each run: from SIM_HANG_LABEL on the run
# stays "running" while its GPUs go quiet (a stuck NCCL collective, a deadlocked loader); the first
# SIM_IDLE_PHASE_LABEL seconds are a data-loading phase. A console spec has no labels: these variables of its `env`
# become them (demos; any other cluster just sees two environment variables).
SIM_HANG_LABEL = "sim/hang-after-s"
SIM_IDLE_PHASE_LABEL = "sim/idle-phase-s"
SIM_ENV_LABELS = {"SIM_HANG_AFTER_S": SIM_HANG_LABEL, "SIM_IDLE_PHASE_S": SIM_IDLE_PHASE_LABEL}


class BackendState(StrEnum):
    """A workload's state as a backend reports it; each backend maps its own states onto these.

    The console's own lifecycle (admitted, cancelling, ...) is apps.workloads.models.WorkloadState;
    apps/workloads/services/state.py maps one onto the other.
    """

    PENDING = "pending"  # accepted by the backend, waiting for resources
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"  # evicted (drain, reclaim); the console may requeue it
    # Stopped by its runtime limit (the spec's max_runtime_s): Kubernetes' DeadlineExceeded
    # (https://kubernetes.io/docs/concepts/workloads/controllers/job/#job-termination-and-cleanup), Slurm's TIMEOUT
    # (https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES). A failure of the run, but neither its
    # code's nor the hardware's: the console does not requeue it after a fault, and chargeback credits nobody.
    TIMED_OUT = "timed-out"
    UNKNOWN = "unknown"  # the backend no longer knows it

    @property
    def finished(self) -> bool:
        return self in {
            BackendState.SUCCEEDED,
            BackendState.FAILED,
            BackendState.CANCELLED,
            BackendState.PREEMPTED,
            BackendState.TIMED_OUT,
            BackendState.UNKNOWN,
        }


class Sharing(StrEnum):
    WHOLE = "whole"
    MIG = "mig"
    TIME_SLICE = "time-slice"
    HAMI = "hami"
    MPS = "mps"  # CUDA Multi-Process Service: the NVIDIA device plugin's sharing.mps, Slurm's gres/mps


# The modes that split a GPU into `replicas` equal replicas (the device plugin's sharing.timeSlicing and
# sharing.mps: https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus): one replica is 1/replicas of a
# GPU in quota and chargeback. Time-slicing shares the GPU's memory and turns; MPS runs the replicas at once in
# one MPS server, each capped at 1/replicas of the GPU's memory and compute.
REPLICATED = frozenset({Sharing.TIME_SLICE, Sharing.MPS})


class Topology(StrEnum):
    ANY = "any"
    NODE = "node"  # all workers on one node
    NVLINK = "nvlink"  # within one NVLink domain
    LEAF = "leaf"  # within one leaf switch


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass
class GpuInfo:
    index: int
    uuid: str
    model: str  # the backend's model string (product label, DCGM modelName or GRES type); the console maps it
    memory_mib: int
    health: str = "healthy"  # healthy | warning | unhealthy | unknown
    health_reason: str = ""
    mig_enabled: bool = False
    mig_instances: list[dict] = field(default_factory=list)
    allocated_to: list[str] = field(default_factory=list)  # backend workload ids
    allocated_fraction: float = 0.0


@dataclass
class NodeInfo:
    name: str
    state: str = "ready"  # ready | not-ready | down
    state_reason: str = ""
    unschedulable: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    pool: str = ""
    pool_purpose: str = ""
    rack: str = ""
    leaf_switch: str = ""
    nvlink_domain: str = ""
    gpu_model: str = ""
    gpu_allocatable: int = 0
    cpu_cores: int = 0
    memory_mib: int = 0
    gpus: list[GpuInfo] = field(default_factory=list)
    # Allocatable extended resources other than GPUs, e.g. an RDMA device plugin's {"rdma/ib": 1} (Kubernetes) or a
    # fabric's GRES {"gres/ib": 1} (Slurm).
    extended_resources: dict[str, int] = field(default_factory=dict)


@dataclass
class Inventory:
    """The cluster's nodes. `complete`: every node (one not in `nodes` is gone); otherwise only the nodes changed
    since the cursor the backend was given, and `removed` names the ones deleted. `cursor`: what the backend needs
    next time to report only changes (stored with the inventory; None: it cannot)."""

    nodes: list[NodeInfo]
    taken_at: datetime
    complete: bool = True
    removed: list[str] = field(default_factory=list)
    cursor: dict | None = None


@dataclass
class ConnectionReport:
    ok: bool
    server_version: str = ""
    message: str = ""
    features: dict[str, bool] = field(default_factory=dict)  # add-ons present, e.g. {"kueue": True}
    notes: list[str] = field(default_factory=list)  # e.g. "node updates go through scontrol (REST lacks them)"


@dataclass
class WorkloadSpec:
    """What the console asks a backend to run, already admitted.

    The fields are the scheduler's summary (the simulator runs from them). A real backend renders `source`,
    the console's typed spec, in `context` (where it runs, from the console's tables) with
    `apps.backends.render.workload`, or applies `manifest` as it is when the caller rendered it already.
    """

    name: str  # unique per cluster; the backend keeps it as its id where it can
    tenant: str
    queue: str = ""
    tier: str = "training"
    priority: int = 500
    gpu_model: str = ""  # console GPU model code, e.g. "h100"; empty: any
    workers: int = 1
    gpus_per_worker: int = 1
    sharing: Sharing = Sharing.WHOLE
    mig_profile: str = ""  # with Sharing.MIG, e.g. "3g.40gb"
    gpu_fraction: float = 1.0  # with TIME_SLICE / MPS / HAMI: the share of one GPU per worker
    gang_min: int | None = None  # workers that must start together; None: all
    topology: Topology = Topology.ANY
    # How long the work takes when nothing stops it (the simulator runs it that long; None: drawn from the seed).
    # Real backends run the rendered command for as long as it takes.
    duration_s: int | None = None
    # The runtime limit (None: none): every backend stops a run still going when it is reached and reports it
    # TIMED_OUT (real backends render it from `source`: activeDeadlineSeconds, sbatch --time).
    max_runtime_s: int | None = None
    image: str = ""
    command: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    source: Spec | None = None  # the typed spec this summary was made from (apps.workloads.specs.to_backend_spec)
    context: WorkloadContext | None = None  # where it runs on this cluster, built by the caller
    manifest: object = None  # already rendered: Kubernetes objects or an sbatch script, applied as they are
    # True only when the caller knows no earlier attempt at this name can have reached the backend (the outbox's
    # first claim of an entry never tried before): a backend whose by-name lookup is costly (Slurm's accounting)
    # may skip it. False (the default, and every retry or takeover): look the name up first.
    first_attempt: bool = False

    @property
    def total_gpus(self) -> float:
        per = self.gpus_per_worker if self.sharing == Sharing.WHOLE else self.gpu_fraction
        return self.workers * per


@dataclass
class Placement:
    node: str
    gpu_indexes: list[int]


@dataclass(frozen=True)
class ReplicaStart:
    """One inference replica's cold start as its backend saw it: scheduled onto a node, then serving (`ready_at`
    None while it is still pulling its image, loading its weights or starting its engine)."""

    replica: str  # the backend's name for it (a pod, a simulated replica)
    node: str
    scheduled_at: datetime
    ready_at: datetime | None = None


@dataclass
class WorkloadStatus:
    backend_id: str
    state: BackendState
    reason: str = ""  # e.g. the pending reason, the failure message
    placements: list[Placement] = field(default_factory=list)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    events: list[str] = field(default_factory=list)
    replica_starts: list[ReplicaStart] = field(default_factory=list)  # serving replicas' cold starts


@dataclass
class SubmitResult:
    backend_id: str
    state: BackendState
    reason: str = ""


@dataclass
class DrainResult:
    node: str
    evicted: list[str]  # backend workload ids sent back to pending / preempted
    blocked: dict[str, str] = field(default_factory=dict)  # what could not be evicted (yet) -> why
    skipped: list[str] = field(default_factory=list)  # left in place on purpose, with why (DaemonSet, mirror pod)


@dataclass
class PushResult:
    applied: int
    unchanged: int = 0
    messages: list[str] = field(default_factory=list)


@dataclass
class UsageRecord:
    """GPU time used by one workload on one GPU model over [start, end)."""

    backend_id: str
    tenant: str
    queue: str
    gpu_model: str
    gpu_fraction: float  # GPUs held (e.g. 8, or 1/7 for a 1g.10gb MIG slice)
    start: datetime
    end: datetime
    # Where it ran, when the backend knows (GPUs of one record hold the same share each); chargeback
    # reads these GPUs' utilization to find idle time. Empty: no idle-waste figure for this record.
    placements: list[Placement] = field(default_factory=list)
    # When this run started (a requeued workload runs again from a new start), when the backend knows:
    # tells a run cut short by a fault from the restart that may follow at the same instant.
    run_started_at: datetime | None = None

    @property
    def gpu_seconds(self) -> float:
        return self.gpu_fraction * (self.end - self.start).total_seconds()


# What the console reads from a backend besides the scheduler calls (see Backend: logs, telemetry).


@dataclass
class WorkloadLogs:
    """How to read a workload's logs when its cluster names no log system: a command to run on the cluster,
    or the log itself (from a backend that keeps it, the simulator). Both empty: the backend knows neither."""

    command: str = ""
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LogSource:
    """The workload whose log `Backend.stream_logs` streams, in the backend's terms.

    `workers` is what the stream's `worker` chooses among: a training job's workers (its pods, or its ranks), or an
    inference service's replicas, whose log is their leader's (the pod or node the engine's API server runs on).
    """

    name: str  # the backend id: the current run's name on the cluster
    workload_id: str  # the console's id, which Kubernetes objects carry as a label
    kind: str = "training"  # "training" or "inference"
    workers: int = 1
    namespace: str = ""  # where it runs, for backends that are `namespaced`

    def prefix(self, worker: int, asked: int | None) -> str:
        """What each line of `worker` starts with when the stream's `worker` argument was `asked`: "[worker K] "
        when the stream holds every worker of several (as `kubectl logs --prefix` names the pod), nothing when one
        worker was asked for or there is only one."""
        return f"[worker {worker}] " if asked is None and self.workers > 1 else ""


@dataclass(frozen=True)
class UtilizationSpan:
    """A GPU's DCGM utilization (DCGM_FI_DEV_GPU_UTIL, %) over [start, end), as 1-minute rollups give it."""

    start: datetime
    end: datetime
    utilization_pct: float


@dataclass(frozen=True)
class MetricsAnswer:
    """What an exporter read in process answered, as its HTTP endpoint would: a node's dcgm-exporter or a
    service's engines."""

    status: int  # 200; 404 no such cluster, node or service; 503 the exporter, the node or the service is down
    body: str
