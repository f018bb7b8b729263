"""Starting operations: permission check, one row, one audit event, the task enqueued on commit."""

from __future__ import annotations

from datetime import timedelta

from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.audit.services import record_event, target_type_of
from apps.core.errors import InvalidInput
from apps.operations.models import Operation, OperationStatus
from apps.operations.runner import HANDLERS


def start_operation(
    actor,
    kind: str,
    *,
    target: models.Model | None = None,
    tenant=None,
    params: dict | None = None,
    reason: str = "",
) -> Operation:
    """Persist an operation and hand it to a worker once the transaction commits.

    Called inside a caller's transaction the task is sent only if that transaction commits; rolled
    back, the row and the task both vanish. `actor` None is the system (automation, which decided under
    its own policy): no permission check, and the audit event names "system".
    """
    from apps.operations.tasks import run_operation_task

    handler = HANDLERS.get(kind)
    if handler is None:
        raise InvalidInput(
            _("Unknown operation kind %(kind)s.") % {"kind": repr(kind)},
            {"kind": _("Choose one of: %(values)s.") % {"values": ", ".join(sorted(HANDLERS))}},
        )
    if actor is not None:
        require(actor, handler.action, tenant)
    with transaction.atomic():
        operation = Operation.objects.create(
            kind=kind,
            target_type=target_type_of(target) if target is not None else "",
            target_id=str(target.pk) if target is not None else "",
            target_label=str(target)[:300] if target is not None else "",
            tenant=tenant,
            actor=actor if getattr(actor, "pk", None) else None,
            reason=reason,
            params=params or {},
        )
        record_event(
            actor,
            "operation.start",
            operation,
            tenant=tenant,
            reason=reason,
            after={"kind": kind, "params": operation.params, "target": operation.target_label},
        )
        transaction.on_commit(lambda: run_operation_task.delay(operation.pk))
    return operation


def prune_operations(older_than_days: int = 90) -> int:
    """Delete finished operations older than the retention window; their own audit events stay."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    with transaction.atomic():
        deleted, _counts = Operation.objects.filter(
            status__in=[OperationStatus.SUCCEEDED, OperationStatus.FAILED], finished_at__lt=cutoff
        ).delete()
        if deleted:
            record_event(
                None,
                "operation.prune",
                target_type="operations.operation",
                target_label=f"{deleted} finished before {cutoff:%Y-%m-%d}",
                after={"deleted": deleted},
            )
    return deleted
