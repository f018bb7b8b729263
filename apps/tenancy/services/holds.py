"""Admission holds: a pause on a tenant subtree's preemptible work that an app above tenancy sets and lifts.

Chargeback holds a tenant whose spend budget is spent when the budget's policy says so, and lifts the hold
when it is not (apps/chargeback/budgets.py); submission refuses preemptible tiers while a hold on the tenant
or one of its ancestors stands. The hold is derived state, like a quota's use: the change that causes it is
what is audited.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.utils.translation import gettext as _

from apps.accounts.models import Tenant
from apps.core.errors import Conflict
from apps.tenancy.models import AdmissionHold


def hold_preemptible(tenant_id: int, *, since: datetime, amount: Decimal, currency: str) -> None:
    """Pause preemptible work of the tenant's subtree (or update the standing hold's figures)."""
    AdmissionHold.objects.update_or_create(
        tenant_id=tenant_id, defaults={"since": since, "amount": amount, "currency": currency}
    )


def lift_hold(tenant_id: int) -> None:
    """Admit the tenant's preemptible work again (nothing to do when there is no hold)."""
    AdmissionHold.objects.filter(tenant_id=tenant_id).delete()


_LOOK = object()


def check_hold(tenant: Tenant, tier, hold_id=_LOOK) -> None:
    """Refuse preemptible work for a tenant held, itself or through an ancestor (one query).

    The submission path reads `hold_id` (the id of such a hold, or None) in its context query
    (apps/workloads/submission_context.py) and passes it in; anyone else lets this look it up.
    """
    if not tier.preemptible:
        return
    if hold_id is _LOOK:
        ancestors = tenant.ancestor_ids() or [tenant.pk]
        hold_id = AdmissionHold.objects.filter(tenant_id__in=ancestors).values_list("id", flat=True).first()
    if hold_id is None:
        return
    hold = AdmissionHold.objects.select_related("tenant").get(pk=hold_id)
    raise Conflict(
        _(
            "Tenant %(tenant)s is over its monthly spend budget (%(amount)s %(currency)s) since %(since)s UTC, and "
            "its budget policy admits no preemptible work: tier %(tier)s is preemptible. Use a non-preemptible "
            "tier, or ask for a budget raise."
        )
        % {
            "tenant": hold.tenant.slug,
            "amount": hold.amount,
            "currency": hold.currency,
            "since": f"{hold.since:%Y-%m-%d %H:%M}",
            "tier": tier.name,
        },
        {"tier": _("Preemptible work is paused: %(slug)s is over budget.") % {"slug": hold.tenant.slug}},
        code="over_budget",
    )
