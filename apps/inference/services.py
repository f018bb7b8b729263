"""Services of the inference telemetry: SLO targets per service (tenant admins, audited) and retention."""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event
from apps.core.errors import InvalidInput
from apps.inference.models import ServiceSlo, TelemetrySample
from apps.workloads.models import Workload, WorkloadKind

# (field, lowest allowed (exclusive), highest allowed (inclusive), unit) for SLO edits.
LIMITS = {
    "ttft_target_s": (0.0, 600.0, "seconds"),
    "tpot_target_s": (0.0, 10.0, "seconds"),
    "objective": (0.5, 0.9999, "a fraction, e.g. 0.99"),
}
PRUNE_BATCH = 10_000


def _checked(name: str, value) -> float:
    low, high, unit = LIMITS[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(
            _("%(name)s must be a number (%(unit)s).") % {"name": name, "unit": unit},
            {name: _("A number (%(unit)s).") % {"unit": unit}},
        )
    if not low < value <= high:
        message = f"must be above {low:g} and at most {high:g} ({unit}), not {value:g}"
        raise InvalidInput(
            _("%(name)s %(message)s.") % {"name": name, "message": message}, {name: message.capitalize() + "."}
        )
    return float(value)


def set_slo(
    actor,
    workload: Workload,
    *,
    ttft_target_s: float | None = None,
    tpot_target_s: float | None = None,
    objective: float | None = None,
    reason: str = "",
) -> ServiceSlo:
    """Set a service's SLO targets (fields left None keep their value). Tenant admins of its tenant."""
    require(
        actor,
        Action.MANAGE,
        workload.tenant,
        _("Only tenant admins of %(slug)s set SLOs.") % {"slug": workload.tenant.slug},
    )
    if workload.kind != WorkloadKind.INFERENCE:
        raise InvalidInput(_("SLOs are for inference services."), {"workload": _("Not an inference service.")})
    given = {"ttft_target_s": ttft_target_s, "tpot_target_s": tpot_target_s, "objective": objective}
    changes = {name: _checked(name, value) for name, value in given.items() if value is not None}
    if not changes:
        message = "Give at least one of ttft_target_s, tpot_target_s, objective."
        raise InvalidInput(message, {"ttft_target_s": _("Required.")})
    with transaction.atomic():
        slo, _created = ServiceSlo.objects.select_for_update().get_or_create(workload=workload)
        before = {name: getattr(slo, name) for name in LIMITS}
        for name, value in changes.items():
            setattr(slo, name, value)
        slo.updated_by = actor if getattr(actor, "pk", None) else None
        slo.save()
        record_event(
            actor,
            "inference.slo.set",
            slo,
            tenant=workload.tenant,
            reason=reason,
            before=before,
            after={name: getattr(slo, name) for name in LIMITS},
            target_label=f"SLO of {workload}",
        )
    return slo


def prune_samples(now=None) -> int:
    """Delete samples older than INFERENCE_TELEMETRY_RETENTION_DAYS, in batches (retention, not a user change)."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.INFERENCE_TELEMETRY_RETENTION_DAYS)
    deleted = 0
    while True:
        ids = list(TelemetrySample.objects.filter(time__lt=cutoff).values_list("id", flat=True)[:PRUNE_BATCH])
        if not ids:
            return deleted
        deleted += TelemetrySample.objects.filter(id__in=ids).delete()[0]
