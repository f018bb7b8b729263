"""The runner that Celery tasks use to carry out an Operation exactly once.

A handler is a class registered for an operation kind, spelled `<app>.<verb-noun>`: the app that owns
the handler (its operation_handlers.py registers it), then what it does, words joined by hyphens:

    @register("health.drain")
    class DrainNode(OperationHandler):
        action = "operate"            # what the acting user must be allowed to do
        def run(self) -> dict:         # returns the operation's result
            self.log("cordoned")
            self.set_progress(50)

A kind that was once spelled otherwise names its old spelling (`register("tenancy.quota-push",
formerly="fleet.quota_push")`): the operations app's data migration rewrote the stored rows, and the
kind filter still finds them by the old name.

`execute_operation(id)` claims the row (pending → running, or a stale running row whose worker
died), runs the handler outside any transaction (handlers call backends), and records success,
a deliberate failure (`OperationFailed`, message only) or a crash (with its traceback), each with one audit
event for the outcome (`operation.succeeded` / `operation.failed`, after the start's `operation.start`).
"""

from __future__ import annotations

import logging
import traceback
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Concat
from django.utils import timezone

from apps.audit.services import record_event
from apps.operations.models import Operation, OperationStatus

logger = logging.getLogger(__name__)

HANDLERS: dict[str, type[OperationHandler]] = {}
# Old spelling → kind, for kinds that were renamed (filled by `register(..., formerly=...)`).
FORMER_KINDS: dict[str, str] = {}
ERROR_AUDITED = 2000  # characters of a failure's message the audit event keeps (the operation keeps it whole)


class OperationFailed(Exception):
    """A handler's deliberate failure: the message is shown to the user, no traceback."""


class OperationHandler:
    """Base class for the work behind one operation kind."""

    kind: str = ""
    action: str = "operate"

    def __init__(self, operation: Operation):
        self.operation = operation

    def run(self) -> dict:
        raise NotImplementedError

    def log(self, message: str) -> None:
        """Append a timestamped line to the operation's log (visible in the UI while it runs)."""
        line = f"{timezone.now():%H:%M:%S} {message}\n"
        Operation.objects.filter(pk=self.operation.pk).update(
            log=Concat(F("log"), Value(line)), heartbeat_at=timezone.now()
        )
        self.operation.log += line

    def set_progress(self, percent: float) -> None:
        percent = min(max(float(percent), 0.0), 100.0)
        Operation.objects.filter(pk=self.operation.pk).update(progress=percent, heartbeat_at=timezone.now())
        self.operation.progress = percent

    def set_steps(self, done: int, total: int, label: str) -> None:
        """Countable progress ("3 of 8 workloads evicted"); the percentage follows. `label` is English (marked
        with gettext_noop by the handler), translated where it is shown."""
        done, total = max(int(done), 0), max(int(total), 0)
        percent = 100.0 * min(done, total) / total if total else self.operation.progress
        percent = min(max(float(percent), 0.0), 100.0)
        Operation.objects.filter(pk=self.operation.pk).update(
            steps_done=done, steps_total=total, steps_label=label, progress=percent, heartbeat_at=timezone.now()
        )
        self.operation.steps_done, self.operation.steps_total, self.operation.steps_label = done, total, label
        self.operation.progress = percent


def register(kind: str, *, formerly: str | None = None):
    """Class decorator: make `cls` the handler for operations of `kind` (once spelled `formerly`)."""

    def decorator(cls: type[OperationHandler]) -> type[OperationHandler]:
        if kind in HANDLERS and HANDLERS[kind] is not cls:
            raise ValueError(f"operation kind {kind!r} is already registered to {HANDLERS[kind].__name__}")
        cls.kind = kind
        HANDLERS[kind] = cls
        if formerly:
            FORMER_KINDS[formerly] = kind
        return cls

    return decorator


def claim(operation_id: int) -> bool:
    """Atomically move the operation to running; False when another delivery already has it."""
    now = timezone.now()
    stale = now - timedelta(seconds=Operation.LEASE_SECONDS)
    claimable = Q(status=OperationStatus.PENDING) | Q(status=OperationStatus.RUNNING, heartbeat_at__lt=stale)
    return (
        Operation.objects.filter(claimable, pk=operation_id).update(
            status=OperationStatus.RUNNING, started_at=now, heartbeat_at=now, attempts=F("attempts") + 1
        )
        == 1
    )


def _finish(operation: Operation, status: str, **fields) -> None:
    """End the operation and audit its outcome in one transaction: `operation.succeeded` with its result (what it
    did) or `operation.failed` with its error, by the actor who started it. With `operation.start` that is one
    event per change of the operation; a row another worker already ended is neither changed nor audited."""
    with transaction.atomic():
        ended = Operation.objects.filter(pk=operation.pk, status=OperationStatus.RUNNING).update(
            status=status, finished_at=timezone.now(), heartbeat_at=timezone.now(), **fields
        )
        if not ended:
            return
        outcome = {"kind": operation.kind, "target": operation.target_label, "status": status}
        if status == OperationStatus.SUCCEEDED:
            outcome["result"] = fields.get("result") or {}
        else:
            outcome["error"] = str(fields.get("error", ""))[:ERROR_AUDITED]
        record_event(
            operation.actor,
            f"operation.{status}",
            operation,
            tenant=operation.tenant,
            reason=operation.reason,
            before={"status": OperationStatus.RUNNING},
            after=outcome,
        )


def execute_operation(operation_id: int) -> bool:
    """Run the operation once. Returns False when there was nothing to do (already claimed or finished)."""
    if not claim(operation_id):
        logger.info("operation %s already claimed or finished; skipping duplicate delivery", operation_id)
        return False
    operation = Operation.objects.select_related("actor", "tenant").get(pk=operation_id)
    # A row written under a kind's old spelling (by a process older than the rename) runs all the same.
    handler_cls = HANDLERS.get(operation.kind) or HANDLERS.get(FORMER_KINDS.get(operation.kind, ""))
    if handler_cls is None:
        _finish(operation, OperationStatus.FAILED, error=f"No handler for operation kind {operation.kind!r}.")
        return True
    handler = handler_cls(operation)
    try:
        result = handler.run() or {}
    except OperationFailed as exc:
        _finish(operation, OperationStatus.FAILED, error=str(exc))
    except Exception as exc:  # a crash must still end the operation visibly, with the traceback for the on-call
        logger.exception("operation %s (%s) crashed", operation.pk, operation.kind)
        _finish(
            operation,
            OperationStatus.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            log=Concat(F("log"), Value(traceback.format_exc())),
        )
    else:
        _finish(operation, OperationStatus.SUCCEEDED, result=result, progress=100.0)
    return True
