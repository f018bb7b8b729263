"""A statement as CSV and JSON for finance systems: its lines, then its totals, amounts as exact decimals."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

from django.http import HttpResponse

from apps.accounts.models import Tenant
from apps.chargeback.models import Statement, StatementLine
from apps.chargeback.statements import lines_of
from apps.fleet.models import GpuModel
from apps.tenancy.models import PriorityTier, Queue

COLUMNS = [
    "period",
    "tenant",
    "source_tenant",
    "kind",
    "gpu_model",
    "queue",
    "tier",
    "rate_per_gpu_hour",
    "currency",
    "gpu_hours",
    "amount",
    "idle_gpu_hours",
    "idle_amount",
    "incident_ref",
    "incident_url",
    "note",
]


def _names(lines: list[StatementLine]) -> dict[str, dict[int, str]]:
    """Labels for the lines' foreign keys, four queries whatever the number of lines."""
    return {
        "tenant": dict(Tenant.objects.filter(pk__in={x.source_tenant_id for x in lines}).values_list("id", "slug")),
        "model": dict(GpuModel.objects.filter(pk__in={x.gpu_model_id for x in lines}).values_list("id", "code")),
        "queue": dict(Queue.objects.filter(pk__in={x.queue_id for x in lines}).values_list("id", "name")),
        "tier": dict(PriorityTier.objects.filter(pk__in={x.tier_id for x in lines}).values_list("id", "name")),
    }


def line_rows(statement: Statement) -> list[dict]:
    lines = lines_of(statement)
    names = _names(lines)
    return [
        {
            "period": statement.period.label,
            "tenant": statement.tenant.slug,
            "source_tenant": names["tenant"].get(line.source_tenant_id, ""),
            "kind": line.kind,
            "gpu_model": names["model"].get(line.gpu_model_id, ""),
            "queue": names["queue"].get(line.queue_id, ""),
            "tier": names["tier"].get(line.tier_id, ""),
            "rate_per_gpu_hour": line.rate,
            "currency": statement.currency,
            "gpu_hours": line.gpu_hours,
            "amount": line.amount,
            "idle_gpu_hours": line.idle_gpu_hours,
            "idle_amount": line.idle_amount,
            "incident_ref": line.incident_ref,
            "incident_url": line.incident_url,
            "note": line.note,
        }
        for line in sorted(
            lines,
            key=lambda x: (
                x.kind,
                names["tenant"].get(x.source_tenant_id, ""),
                names["model"].get(x.gpu_model_id, ""),
                names["queue"].get(x.queue_id, ""),
                names["tier"].get(x.tier_id, ""),
                x.rate or Decimal(0),
            ),
        )
    ]


def totals(statement: Statement) -> dict:
    return {
        "gpu_hours": statement.gpu_hours,
        "usage_amount": statement.usage_amount,
        "credit_gpu_hours": statement.credit_gpu_hours,
        "credit_amount": statement.credit_amount,
        "idle_gpu_hours": statement.idle_gpu_hours,
        "idle_amount": statement.idle_amount,
        "total": statement.total,
    }


def _text(value) -> str:
    return "" if value is None else str(value)


def to_csv(statement: Statement) -> str:
    """The lines (one row each), then one `total` row whose amount is the statement's total."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in line_rows(statement):
        writer.writerow({key: _text(value) for key, value in row.items()})
    writer.writerow(
        {
            "period": statement.period.label,
            "tenant": statement.tenant.slug,
            "kind": "total",
            "currency": statement.currency,
            "gpu_hours": _text(statement.gpu_hours - statement.credit_gpu_hours),
            "amount": _text(statement.total),
            "idle_gpu_hours": _text(statement.idle_gpu_hours),
            "idle_amount": _text(statement.idle_amount),
        }
    )
    return out.getvalue()


def to_json(statement: Statement) -> dict:
    """Decimals as strings (never floats), so a finance system reads the exact amounts."""
    return {
        "period": statement.period.label,
        "period_start": statement.period.start.isoformat(),
        "period_end": statement.period.end.isoformat(),
        "period_state": statement.period.state,
        "tenant": statement.tenant.slug,
        "currency": statement.currency,
        "computed_at": statement.computed_at.isoformat(),
        "totals": {key: _text(value) for key, value in totals(statement).items()},
        "lines": [{key: _text(value) for key, value in row.items()} for row in line_rows(statement)],
    }


def export_name(statement: Statement, extension: str) -> str:
    """The file name a downloaded statement gets, e.g. statement-acme-2026-10.csv."""
    return f"statement-{statement.tenant.slug}-{statement.period}.{extension}"


def csv_response(statement: Statement) -> HttpResponse:
    response = HttpResponse(to_csv(statement), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{export_name(statement, "csv")}"'
    return response
