"""The workloads app's own previews beside the submit form (registered in WorkloadsConfig.ready, see
apps/workloads/panels.py): what admission would decide now, and what the cluster would receive.

Each takes the spec checked as a submission checks it (`PreparedSubmission`) and gives its template a context.
The admission preview speaks the admission engine's own words: the reason a claim would be stored with is the one
the workload's page will show (translated the same way, apps/core/stored_text.py).
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.backends.shares import SHARE_UNITS, format_share
from apps.core.stored_text import translate_stored
from apps.tenancy.admission import POOL, Decision
from apps.tenancy.models import Queue
from apps.tenancy.reservations import show_time
from apps.workloads.services.previews import admission_preview, preview_cluster, rendering_preview

ADMISSION_TITLE = gettext_noop("Admission now")
RENDERING_TITLE = gettext_noop("What the cluster receives")


def _lenders(user, dry) -> str:
    """Whom it would borrow from: the queues the user may see by name, another tenant's queue as such."""
    visible = {
        q.pk: f"{q.tenant.slug}/{q.name}"
        for q in Queue.objects.for_user(user, "view")
        .filter(pk__in=[q for q in dry.borrow if q != POOL])
        .select_related("tenant")
    }
    parts = []
    for lender, units in dry.borrow.items():
        amount = format_share(units, dry.unit)
        who = _("unguaranteed capacity") if lender == POOL else visible.get(lender) or _("another tenant's queue")
        parts.append(_("%(amount)s from %(lender)s") % {"amount": amount, "lender": who})
    return ", ".join(parts)


def admission_context(user, prepared) -> dict:
    """What admission would decide if the spec were submitted now (tenancy's dry run of the real decision)."""
    dry = admission_preview(user, prepared)
    need = format_share(prepared.parsed.total_units, SHARE_UNITS)
    model = prepared.model.name
    free = format_share(dry.free_in_guarantee, dry.unit)
    if dry.decision == Decision.ADMIT:
        headline = _("Would start now, within guarantee.")
    elif dry.decision == Decision.BORROW:
        headline = _("Would start now, borrowing %(lenders)s.") % {"lenders": _lenders(user, dry)}
    elif dry.decision == Decision.RECLAIM:
        headline = _(
            "Would wait while lent GPUs are reclaimed: needs %(need)s × %(model)s, %(free)s free within guarantee."
        ) % {"need": need, "model": model, "free": free}
    elif dry.decision == Decision.QUEUE:
        headline = _("Would wait: needs %(need)s × %(model)s, %(free)s free within guarantee.") % {
            "need": need,
            "model": model,
            "free": free,
        }
    else:
        headline = _("Would be refused: it can never be admitted as it is.")
    return {
        "dry": dry,
        "headline": headline,
        "reason": translate_stored(dry.reason),
        "start_reason": translate_stored(dry.start_reason) if dry.start_reason != dry.reason else "",
        "cluster": dry.cluster,
        "several": len(prepared.viable) > 1,
        "need": need,
        "model": model,
        "tier": prepared.tier,
        # As the reasons write it (UTC, to the minute, never early), whatever the console's TIME_ZONE.
        "start": show_time(dry.expected_start) if dry.expected_start else "",
    }


def rendering_context(user, prepared) -> dict:
    """The manifests or the sbatch script for the cluster it names or placement would choose, strictly validated."""
    cluster = preview_cluster(user, prepared)
    return {"rendering": rendering_preview(prepared, cluster), "several": len(prepared.viable) > 1}
