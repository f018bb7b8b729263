"""Writing audit events. Every service calls `record_event` inside its own transaction."""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

from django.db import connection, models
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.core.inserts import insert_row
from apps.core.request_context import get_request_id


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    return value


def snapshot(instance: models.Model, fields: list[str] | None = None) -> dict[str, Any]:
    """The audited view of a model instance: concrete fields (FKs as ids), secrets never included."""
    out: dict[str, Any] = {}
    for field in instance._meta.concrete_fields:
        if fields is not None and field.name not in fields:
            continue
        if field.name in {"password", "digest"}:
            continue
        out[field.name] = _jsonable(getattr(instance, field.attname))
    return out


def actor_label(actor) -> str:
    if actor is None:
        return "system"
    token = getattr(actor, "api_token", None)
    if token is not None:
        return f"{actor.get_username()} (token {token.prefix}…)"
    return actor.get_username()


def target_type_of(target: models.Model) -> str:
    """How the trail names a target's model: its label, unless the model keeps an older name
    (`audit_target_type`, e.g. a model that moved between apps) so old and new events match."""
    return getattr(target, "audit_target_type", None) or target._meta.label_lower


def record_event(actor, action: str, target: models.Model | None = None, **fields) -> AuditEvent:
    """Append one audit event. Must run inside the caller's transaction so the change and its record commit together.

    `fields` are `audit_row`'s keyword arguments (tenant, reason, before, after, target_type/_id/_label).
    """
    return insert_row(audit_row(actor, action, target, **fields))


def audit_row(
    actor,
    action: str,
    target: models.Model | None = None,
    *,
    tenant=None,
    reason: str = "",
    before: dict | None = None,
    after: dict | None = None,
    target_type: str | None = None,
    target_id: str | None = None,
    target_label: str | None = None,
    one_statement: bool = False,
) -> AuditEvent:
    """The event `record_event` would append, unsaved: for a service that writes its rows in one statement
    (`apps.core.inserts.insert_rows`) inside its transaction.

    `one_statement=True` is the one exception to "inside the service's transaction": the caller may build the event
    before its transaction opens because the event is then written by the same single statement as the change it
    records (`apps.core.inserts.insert_rows_if_locked`: one INSERT … SELECT writes every row or none). That is
    atomic by being one statement: the change cannot commit without its event, nor the event without the change.
    A submission decided within its guarantee builds its rows so before it takes the admission lock."""
    if not one_statement and not connection.in_atomic_block:
        raise RuntimeError("audit events must be written inside the service's transaction.atomic() block")
    if target is not None:
        target_type = target_type or target_type_of(target)
        target_id = target_id or str(target.pk)
        target_label = target_label or str(target)[:300]
    return AuditEvent(
        time=timezone.now(),
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=actor_label(actor),
        token=getattr(actor, "api_token", None),
        action=action,
        target_type=target_type or "",
        target_id=target_id or "",
        target_label=target_label or "",
        tenant=tenant,
        tenant_label=tenant.slug if tenant is not None else "",
        reason=reason,
        before=_jsonable(before) if before is not None else None,
        after=_jsonable(after) if after is not None else None,
        request_id=get_request_id(),
    )
