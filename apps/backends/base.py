"""The one interface every backend implements, and its errors.

Backends are called outside any database transaction or lock (a Kubernetes or Slurm call may take
seconds). Each error says whether trying again later can help: retryable errors (timeouts,
connection refused, 5xx, throttling) make work wait and retry with backoff; permanent ones
(validation, 4xx, unknown node) are reported to the user and not retried.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime

from django.utils import timezone

from apps.backends.types import (
    ConnectionReport,
    DrainResult,
    Inventory,
    PushResult,
    QuotaSpec,
    SubmitResult,
    Taint,
    UsageRecord,
    WorkloadSpec,
    WorkloadStatus,
)


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


class Backend(ABC):
    """A cluster's scheduler as the console sees it. One instance per cluster, cheap to create."""

    kind: str = ""

    def __init__(self, cluster):
        self.cluster = cluster

    # Connection and inventory

    @abstractmethod
    def test_connection(self) -> ConnectionReport: ...

    @abstractmethod
    def inventory(self) -> Inventory: ...

    # Workloads

    @abstractmethod
    def submit(self, spec: WorkloadSpec) -> SubmitResult:
        """Submit or apply; idempotent by `spec.name` (submitting the same name again returns the existing one)."""

    @abstractmethod
    def status(self, backend_ids: list[str]) -> dict[str, WorkloadStatus]:
        """Current state of each id; ids the backend does not know map to WorkloadState.UNKNOWN."""

    @abstractmethod
    def cancel(self, backend_id: str) -> WorkloadStatus:
        """Cancel and return the state afterwards; cancelling a finished workload is not an error."""

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
    def push_quota(self, quotas: list[QuotaSpec]) -> PushResult: ...

    @abstractmethod
    def usage_since(self, since: datetime) -> list[UsageRecord]: ...

    # What the console asks besides the scheduler calls

    def now(self) -> datetime:
        """The backend's clock, the one its usage spans and workload times are in (a simulation runs ahead of
        the wall clock by its offset; real clusters are on the wall clock)."""
        return timezone.now()
