"""The one interface every backend implements, and its errors.

Backends are called outside any database transaction or lock (a Kubernetes or Slurm call may take
seconds). Each error says whether trying again later can help: retryable errors (timeouts,
connection refused, 5xx, throttling) make work wait and retry with backoff; permanent ones
(validation, 4xx, unknown node) are reported to the user and not retried.

The interface is the only code that knows a cluster's kind: besides the scheduler calls it answers what the
rest of the console would otherwise branch on the kind for (the backend's clock, where a workload's logs are,
its own telemetry, whether the cluster is a simulation), each with a default that fits a real cluster.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from django.utils import timezone

from apps.backends.types import (
    ConnectionReport,
    DrainResult,
    Inventory,
    LogSource,
    MetricsAnswer,
    PushResult,
    SubmitResult,
    Taint,
    UsageRecord,
    UtilizationSpan,
    WorkloadLogs,
    WorkloadSpec,
    WorkloadStatus,
)

if TYPE_CHECKING:
    from apps.backends.render.desired import DesiredState
    from apps.backends.render.spec import Spec
    from apps.backends.render.workload.context import RenderedScript, RenderedWorkload, WorkloadContext
    from apps.backends.render.workload.network import Fabric
    from apps.core.text import Text


class BackendError(Exception):
    """A backend call failed. `retryable` says whether the same call may succeed later."""

    retryable = False

    def __init__(self, message: str, *, retryable: bool | None = None):
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class RetryableBackendError(BackendError):
    """Timeouts, unreachable API, 5xx, throttling: try again with backoff."""

    retryable = True


class PermanentBackendError(BackendError):
    """Bad request, unknown object, not allowed: trying again will not help."""

    retryable = False


class NotFoundError(PermanentBackendError):
    """The node, GPU or workload named does not exist in the backend."""


class LogsUnavailable(PermanentBackendError):
    """This cluster cannot stream a workload's log: its backend has no way to, or its settings say not to."""


class LogsNotReady(PermanentBackendError):
    """There is no log to read now: the workload has not started where its log is written (a pending pod, a
    container waiting to start, a job not running yet), or what held its log is gone (pods deleted after the end)."""


class LogWorkerError(PermanentBackendError):
    """The `worker` asked for is not one whose log this backend can give on its own (its message says which are)."""


class Backend(ABC):
    """A cluster's scheduler as the console sees it. One instance per cluster, cheap to create: creating one
    never connects nor fails (a backend reads its connection settings on first use)."""

    kind: str = ""
    # Which renderer of apps.backends.render speaks for this backend, "kubernetes" or "slurm": the pages show
    # its rendering of the desired quota state and its caveats (a simulated cluster shows Kubernetes').
    renderer: str = ""
    # Its workloads run only in the GPU pools its inventory shows (apps/backends/render/pools.py): the render
    # context then carries them (WorkloadContext.gpu_pools) and a shared GPU outside them is refused. A
    # simulated cluster renders for Kubernetes but runs every sharing mode.
    gpu_pools_from_inventory: bool = False

    def __init__(self, cluster):
        self.cluster = cluster

    @classmethod
    def connection_errors(cls, connection: dict) -> list[str]:
        """What is wrong with a cluster's connection settings for this backend, as "key: problem" messages ([]
        when nothing is). Checked when a cluster is added or changed, so a bad setting is refused at once."""
        return []

    @classmethod
    def fabric_errors(cls, fabric: Fabric, connection: dict) -> list[tuple[str, Text]]:
        """What is wrong with a node pool's fabric on a cluster of this kind with these connection settings, as
        (field, message) ([] when nothing is): checked when a platform admin declares it, so a fabric this cluster's
        workloads could not use is refused at once (render/workload/network.py)."""
        from apps.backends.render.workload.network import fabric_errors

        return fabric_errors(fabric, cls.renderer or "kubernetes")

    # Connection and inventory

    @abstractmethod
    def test_connection(self) -> ConnectionReport: ...

    @abstractmethod
    def inventory(self) -> Inventory: ...

    def inventory_since(self, cursor: dict | None) -> Inventory:
        """The inventory, or only what changed since `cursor` (the one a previous answer carried): backends that
        can watch for changes override this; the others list everything."""
        return self.inventory()

    # Workloads

    def render(self, spec: Spec, context: WorkloadContext) -> RenderedWorkload | RenderedScript:
        """What this cluster is given for the console's typed `spec` in `context`: the workload page shows its
        `text`, and `submit` applies the same rendering. Pure (no call to the cluster, so not timed); raises
        RenderError / ValueError for what cannot be expressed here."""
        raise PermanentBackendError(f"{self.kind} clusters have no workload renderer")

    @abstractmethod
    def submit(self, spec: WorkloadSpec) -> SubmitResult:
        """Submit or apply; idempotent by `spec.name` (submitting the same name again returns the existing one).

        A real backend renders `spec.source` in `spec.context` (see `render`), or applies `spec.manifest`.
        """

    @abstractmethod
    def status(self, backend_ids: list[str]) -> dict[str, WorkloadStatus]:
        """Current state of each id; ids the backend does not know map to BackendState.UNKNOWN."""

    @abstractmethod
    def cancel(self, backend_id: str) -> WorkloadStatus:
        """Cancel and return the state afterwards; cancelling a finished workload is not an error."""

    def stream_logs(
        self, source: LogSource, *, tail: int, follow: bool, worker: int | None, until: float | None = None
    ) -> Iterator[str]:
        """The log of `source` as lines (without their newline): the last `tail` lines of each worker's log, then,
        with `follow`, each line as it is written until the workload stops running or `until` (a `time.monotonic()`
        value) passes. `worker` picks one worker (0 .. source.workers - 1; an inference service's replica, read from
        its leader); None takes every one, each line prefixed as `LogSource.prefix` says.

        What can be refused is refused before this returns (LogsNotReady, LogWorkerError, LogsUnavailable, the
        cluster's own errors), so the caller answers it as an error; an error while streaming is raised by the
        iterator. Closing the iterator stops every read it started. Nothing is stored: the lines come from the
        cluster each time."""
        raise LogsUnavailable(f"cluster {self.cluster.name}: {self.kind or 'this'} clusters cannot stream logs")

    # Node operations

    @abstractmethod
    def cordon(self, node: str, reason: str = "") -> None: ...

    @abstractmethod
    def uncordon(self, node: str) -> None: ...

    @abstractmethod
    def drain(self, node: str, reason: str = "") -> DrainResult:
        """Cordon, then evict what runs on the node (the backend requeues it); returns what was evicted."""

    @abstractmethod
    def resume(self, node: str) -> None:
        """Return a drained node to service (uncordon, clear the drain reason)."""

    @abstractmethod
    def taint(self, node: str, taint: Taint) -> None: ...

    @abstractmethod
    def untaint(self, node: str, key: str) -> None: ...

    # Quota and usage

    @abstractmethod
    def push_quota(self, state: DesiredState) -> PushResult:
        """Make the cluster hold `state` (built by tenancy), rendered in the backend's own terms."""

    @abstractmethod
    def usage_since(self, since: datetime) -> list[UsageRecord]: ...

    # What the console asks besides the scheduler calls. None of these is timed as a backend call, and none
    # needs the cluster's connection: they answer from the cluster row, the console's database or the
    # backend's own state.

    def now(self) -> datetime:
        """The backend's clock, the one its usage spans and workload times are in (a simulation runs ahead of
        the wall clock by its offset; real clusters are on the wall clock)."""
        return timezone.now()

    #: Workloads run in namespaces (Kubernetes): `workload_logs` needs the one the workload runs in.
    namespaced = False

    def workload_logs(self, name: str, workload_id: str, namespace: str = "") -> WorkloadLogs:
        """How to read the logs of workload `name` (the backend id; `workload_id` is the console's id, which the
        workload carries as a label) when the cluster's connection names no log system."""
        return WorkloadLogs()

    #: The backend produces its own telemetry (the simulator): every node's DCGM text (`node_metrics`), its
    #: inference services' engine metrics (`service_metrics`), read in process, and its GPUs' past utilization
    #: (`gpu_utilization`). Real clusters are read at the exporters their operators run, and their utilization
    #: comes from the console's own DCGM rollups.
    telemetry_in_process = False

    def node_metrics(self, nodes: list[str]) -> dict[str, MetricsAnswer]:
        """What each node's dcgm-exporter answers, read in process (backends with `telemetry_in_process`)."""
        raise PermanentBackendError(f"cluster {self.cluster.name}: no DCGM telemetry in process")

    def service_metrics(self, name: str) -> MetricsAnswer:
        """What inference service `name`'s engines answer on /metrics, read in process (`telemetry_in_process`)."""
        raise PermanentBackendError(f"cluster {self.cluster.name}: no engine metrics in process")

    def gpu_utilization(
        self, gpus: dict[str, tuple[str, int]], start: datetime, end: datetime
    ) -> dict[str, list[UtilizationSpan]]:
        """Per GPU UUID (`gpus` maps it to its node and index), its utilization over [start, end) as 1-minute
        rollups would give it, minutes without data left out (`telemetry_in_process` backends)."""
        return {}

    def service_metrics_url(self, name: str, values: dict[str, str]) -> str:
        """Where inference service `name`'s engines answer /metrics when the cluster's connection names no
        `inference_metrics_url`; '' when the backend knows no such place. `values` are those the template may
        use ({name}, {service}, {namespace}, {port}, {cluster}), not yet URL-quoted."""
        return ""

    def stack_dump(self, namespace: str, pod: str, node: str, job: str) -> str | None:
        """A stack dump of pod `pod`'s processes that the backend takes by itself, for a hung job's incident; None
        when it takes none (real clusters: the console runs HUNG_JOB_DUMP_COMMAND instead, when it is set)."""
        return None

    # A simulation: the controls of a backend that simulates its cluster (faults, its clock, the fleet shape)

    #: The class of the controls `simulation()` returns, for a backend that simulates its cluster; None for
    #: backends of real clusters. Its class-level helpers (the fleet shape's checks) serve cluster creation.
    simulation_class: type | None = None

    def simulation(self):
        """The controls of this cluster's simulation, or None when the cluster is real."""
        return None if self.simulation_class is None else self.simulation_class(self.cluster)
