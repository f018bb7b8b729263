"""Chargeback services: rate cards, closing and reopening periods, spend budgets, fault credits.

Each checks the actor's permission, runs in one transaction and writes exactly one audit event.
System work (metering, settling credits, budget checks) lives in metering.py, credits.py and
budgets.py and is driven by the periodic tasks.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.models import Tenant
from apps.accounts.permissions import has_perm, require
from apps.accounts.roles import Action
from apps.audit.services import record_event, snapshot
from apps.chargeback.budgets import sync_hold
from apps.chargeback.fractions import SECOND_PLACES, exact_seconds, to_decimal
from apps.chargeback.metering import backend_now, console_workloads
from apps.chargeback.models import (
    Credit,
    MeterWatermark,
    Period,
    PeriodState,
    RateCard,
    SpendBudget,
    UsageRecord,
)
from apps.chargeback.periods import period_for
from apps.chargeback.rates import RateBook
from apps.chargeback.rollup import days_of, rebuild_days
from apps.chargeback.statements import compute_statements, save_statements
from apps.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from apps.fleet.models import Cluster, GpuModel
from apps.tenancy.models import PriorityTier

DEFAULT_THRESHOLDS = [50, 80, 100]
MAX_RATE = Decimal("1000000")


def _decimal(value, field: str, *, places: int, maximum: Decimal) -> Decimal:
    if isinstance(value, float | bool):
        raise InvalidInput(
            _("%(field)s must be a decimal string or integer, not a float.") % {"field": field},
            {field: _("A decimal, e.g. 2.50.")},
        )
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise InvalidInput(
            _("%(field)s must be a decimal number, not %(value)s.") % {"field": field, "value": repr(value)},
            {field: _("A decimal, e.g. 2.50.")},
        ) from None
    if not number.is_finite() or number < 0 or number > maximum:
        raise InvalidInput(
            _("%(field)s must be between 0 and %(maximum)s.") % {"field": field, "maximum": maximum},
            {field: _("0 to %(maximum)s.") % {"maximum": maximum}},
        )
    if -number.as_tuple().exponent > places:
        raise InvalidInput(
            _("%(field)s has more than %(places)s decimal places.") % {"field": field, "places": places},
            {field: _("At most %(places)s decimals.") % {"places": places}},
        )
    return number


#
# Rate cards
#


def set_rate(
    actor,
    *,
    gpu_model: GpuModel,
    rate,
    effective_from: datetime,
    tier: PriorityTier | None = None,
    note: str = "",
) -> RateCard:
    """Price a GPU-hour of `gpu_model` (for `tier`, or every tier) from `effective_from` on (platform admins).

    The earlier cards stay (history). Usage already metered in open periods after `effective_from` is
    split at that instant and repriced; closed periods never change, so a card cannot take effect in one.
    """
    require(actor, Action.ADMINISTER, None, _("Only platform admins set GPU rates."))
    amount = _decimal(rate, "rate", places=6, maximum=MAX_RATE)
    if effective_from is None or timezone.is_naive(effective_from):
        raise InvalidInput(
            _("effective_from needs a date, time and time zone."), {"effective_from": _("An aware datetime.")}
        )
    closed = Period.objects.filter(state=PeriodState.CLOSED, end__gt=effective_from).order_by("start").first()
    if closed is not None and closed.start <= effective_from:
        raise Conflict(
            _("Period %(closed)s is closed; a rate cannot take effect inside it. Reopen it first.")
            % {"closed": closed},
            {"effective_from": _("Inside closed period %(closed)s.") % {"closed": closed}},
        )
    with transaction.atomic():
        try:
            with transaction.atomic():
                card = RateCard.objects.create(
                    gpu_model=gpu_model,
                    tier=tier,
                    rate=amount,
                    currency=settings.CHARGEBACK_CURRENCY,
                    effective_from=effective_from,
                    note=note[:300],
                    created_by=actor if getattr(actor, "pk", None) else None,
                )
        except IntegrityError:
            raise Conflict(
                _("A rate for this model and tier already starts at that time."),
                {"effective_from": _("Already used for this model and tier.")},
            ) from None
        repriced = reprice_open_usage(gpu_model, effective_from)
        record_event(actor, "chargeback.rate.set", card, after={**snapshot(card), "records_repriced": repriced})
    return card


def reprice_open_usage(gpu_model: GpuModel, effective_from: datetime) -> int:
    """Split open-period records of `gpu_model` that straddle `effective_from` and re-point every later one's card."""
    open_q = Q(gpu_model=gpu_model, period__state=PeriodState.OPEN)
    days = days_of(UsageRecord.objects.filter(open_q, end__gt=effective_from))
    straddling = list(UsageRecord.objects.filter(open_q, start__lt=effective_from, end__gt=effective_from))
    if straddling:
        split_records(straddling, effective_from)
    book = RateBook()
    changes = [t for t in book.change_times(gpu_model.pk) if t >= effective_from]
    edges = [*sorted(set(changes)), None]
    count = 0
    tier_ids = set(UsageRecord.objects.filter(open_q, start__gte=effective_from).values_list("tier_id", flat=True))
    for tier_id in tier_ids:
        for left, right in itertools.pairwise(edges):
            card = book.card_for(gpu_model.pk, tier_id, left)
            rows = UsageRecord.objects.filter(open_q, tier_id=tier_id, start__gte=left)
            if right is not None:
                rows = rows.filter(start__lt=right)
            count += rows.update(rate_card=card)
    rebuild_days(days)
    return count


def split_records(records: list[UsageRecord], at: datetime) -> None:
    """Cut each record in two at `at`, sharing its GPU-seconds (and idle/used) in proportion to time.

    The second piece takes what the first leaves, so the two add up to the original exactly.
    """
    amounts = ("gpu_seconds", "idle_gpu_seconds", "used_gpu_seconds")
    pieces = []
    for record in records:
        part = exact_seconds(at - record.start) / exact_seconds(record.end - record.start)
        fields = {f.attname: getattr(record, f.attname) for f in UsageRecord._meta.concrete_fields if f.name != "id"}
        first, second = UsageRecord(**fields), UsageRecord(**fields)
        first.end = second.start = at
        for piece in (first, second):
            piece.seconds = to_decimal(exact_seconds(piece.end - piece.start), SECOND_PLACES)
        for name in amounts:
            whole = getattr(record, name)
            if whole is not None:
                share = to_decimal(part * Fraction(whole), SECOND_PLACES)
                setattr(first, name, share)
                setattr(second, name, whole - share)
        pieces += [first, second]
    UsageRecord.objects.filter(pk__in=[r.pk for r in records]).delete()
    UsageRecord.objects.bulk_create(pieces)


#
# Periods
#


def unmetered_clusters(period: Period) -> list[str]:
    """Clusters whose usage is not metered up to the period's end (their records may still be missing)."""
    marks = dict(MeterWatermark.objects.values_list("cluster_id", "metered_until"))
    out = []
    with_usage = UsageRecord.objects.filter(period=period).values("cluster_id")
    for pk, name in Cluster.objects.filter(Q(created_at__lt=period.end) | Q(pk__in=with_usage)).values_list(
        "pk", "name"
    ):
        until = marks.get(pk)
        if until is None or until < period.end:
            out.append(f"{name} (metered until {until:%Y-%m-%d %H:%M} UTC)" if until else f"{name} (never metered)")
    return out


def close_period(actor, period: Period, *, reason: str = "") -> Period:
    """Close a finished period (platform admins): lock its records and credits and write every tenant's statement."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins close billing periods."))
    missing = unmetered_clusters(period)
    if missing:
        raise Conflict(
            _("Period %(period)s cannot close yet: usage is not metered to its end on %(clusters)s.")
            % {"period": period, "clusters": ", ".join(missing)},
            {"period": _("Usage not metered to the period's end.")},
            code="usage_not_metered",
        )
    with transaction.atomic():
        locked = Period.objects.select_for_update().get(pk=period.pk)
        if locked.is_closed:
            raise Conflict(
                _("Period %(locked)s is already closed.") % {"locked": locked}, {"period": _("Already closed.")}
            )
        from apps.chargeback.credits import settle_credits

        settle_credits(period=locked)
        statements = compute_statements(locked)
        save_statements(locked, statements)
        locked.state, locked.closed_at = PeriodState.CLOSED, timezone.now()
        locked.closed_by = actor if getattr(actor, "pk", None) else None
        locked.save(update_fields=["state", "closed_at", "closed_by"])
        record_event(
            actor,
            "chargeback.period.close",
            locked,
            reason=reason,
            after={
                "state": locked.state,
                "statements": len(statements),
                "total": str(sum((s.total for s in statements if s.tenant.parent_id is None), Decimal("0.00"))),
            },
        )
    return locked


def reopen_period(actor, period: Period, *, reason: str) -> Period:
    """Reopen a closed period (platform admins, with a reason). Its statements stay as drafts until it closes again."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins reopen billing periods."))
    if not (reason or "").strip():
        raise InvalidInput(_("Reopening a closed period needs a reason."), {"reason": _("Required.")})
    with transaction.atomic():
        locked = Period.objects.select_for_update().get(pk=period.pk)
        if not locked.is_closed:
            raise Conflict(_("Period %(locked)s is not closed.") % {"locked": locked}, {"period": _("Not closed.")})
        before = {"state": locked.state, "closed_at": locked.closed_at}
        locked.state, locked.closed_at, locked.closed_by = PeriodState.OPEN, None, None
        locked.save(update_fields=["state", "closed_at", "closed_by"])
        record_event(
            actor,
            "chargeback.period.reopen",
            locked,
            reason=reason.strip(),
            before=before,
            after={"state": locked.state},
        )
    return locked


#
# Spend budgets
#


def _require_budget_manager(actor, tenant: Tenant) -> None:
    # As for GPU guarantees: platform admins set an organization's budget, the parent's managers a team's.
    if tenant.parent_id is None:
        require(actor, Action.ADMINISTER, None, _("Only platform admins set an organization's spend budget."))
    else:
        require(actor, Action.MANAGE, tenant.parent, _("You may not manage %(slug)s.") % {"slug": tenant.parent.slug})


def set_spend_budget(
    actor,
    *,
    tenant: Tenant,
    monthly_amount,
    thresholds: list[int] | None = None,
    block_preemptible_when_over: bool = False,
    reason: str = "",
) -> SpendBudget:
    """Set a tenant's monthly money budget (its subtree's spend), alert thresholds and admission policy."""
    if not has_perm(actor, Action.VIEW, tenant):
        raise NotFound(_("No tenant %(slug)s.") % {"slug": repr(tenant.slug)}, {"tenant": _("Not found.")})
    _require_budget_manager(actor, tenant)
    amount = _decimal(monthly_amount, "monthly_amount", places=2, maximum=Decimal("1e12"))
    thresholds = DEFAULT_THRESHOLDS if thresholds is None else thresholds
    if (
        not isinstance(thresholds, list)
        or not thresholds
        or any(isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= 1000 for t in thresholds)
    ):
        raise InvalidInput(
            _("thresholds are whole percentages from 1 to 1000, e.g. [50, 80, 100]."),
            {"thresholds": _("Whole percentages, 1 to 1000.")},
        )
    if not isinstance(block_preemptible_when_over, bool):
        raise InvalidInput(
            _("block_preemptible_when_over is true or false."), {"block_preemptible_when_over": _("Boolean.")}
        )
    with transaction.atomic():
        budget = SpendBudget.objects.select_for_update().filter(tenant=tenant).first()
        before = snapshot(budget) if budget else None
        if budget is None:
            budget = SpendBudget(tenant=tenant)
        budget.monthly_amount = amount
        budget.currency = settings.CHARGEBACK_CURRENCY
        budget.thresholds = sorted(set(thresholds))
        budget.block_preemptible_when_over = block_preemptible_when_over
        budget.save()
        sync_hold(budget)  # the policy or the amount changed: admission's hold follows
        record_event(
            actor, "chargeback.budget.set", budget, tenant=tenant, reason=reason, before=before, after=snapshot(budget)
        )
    return budget


#
# Credits
#


def _require_crediting(actor) -> None:
    if actor is None:  # the system: the health app's automation crediting what a fault killed
        return
    if not (has_perm(actor, Action.ADMINISTER, None) or has_perm(actor, Action.OPERATE, None)):
        raise Forbidden(_("Only platform admins and on-call engineers credit fault losses."))


def credit_interruptions(
    actor,
    *,
    cluster: Cluster,
    backend_ids: list[str],
    interrupted_at: datetime,
    reason: str,
    incident_ref: str = "",
    incident_url: str = "",
    checkpoint_at: datetime | None = None,
) -> list[Credit]:
    """Credit the workloads a hardware fault interrupted (e.g. the `evicted` of a drain's DrainResult).

    `interrupted_at` is in the backend's clock (see `backend_now`). Each credit stays pending until
    usage is metered past `interrupted_at`; then the run's GPU time since its start (or the last
    checkpoint) becomes the credit. One credit per workload and interruption: a repeat adds nothing.
    """
    _require_crediting(actor)
    if not (reason or "").strip():
        raise InvalidInput(_("A credit needs a reason (the fault)."), {"reason": _("Required.")})
    period = period_for(interrupted_at)
    if period.is_closed:
        raise Conflict(
            _("Period %(period)s is closed; credits for it cannot be added.") % {"period": period},
            {"interrupted_at": _("Closed period.")},
        )
    # Whose work it was: the console's workload, else the latest metered usage of that backend id.
    owners = {
        backend_id: (w.pk, w.tenant_id, w.queue_id, w.tier_id, w.gpu_model_id)
        for backend_id, w in console_workloads(cluster, set(backend_ids)).items()
    }
    for backend_id, tenant_id, queue_id, tier_id, model_id in (
        UsageRecord.objects.filter(cluster=cluster, backend_id__in=set(backend_ids) - set(owners), tenant__isnull=False)
        .order_by("start")
        .values_list("backend_id", "tenant_id", "queue_id", "tier_id", "gpu_model_id")
    ):
        owners[backend_id] = (None, tenant_id, queue_id, tier_id, model_id)
    created = []
    with transaction.atomic():
        for backend_id in backend_ids:
            if backend_id not in owners:
                continue  # nothing metered and no console workload: no tenant to credit
            workload_id, tenant_id, queue_id, tier_id, model_id = owners[backend_id]
            credit, new = Credit.objects.get_or_create(
                cluster=cluster,
                backend_id=backend_id,
                interrupted_at=interrupted_at,
                defaults={
                    "workload_id": workload_id,
                    "tenant_id": tenant_id,
                    "queue_id": queue_id,
                    "tier_id": tier_id,
                    "gpu_model_id": model_id,
                    "period": period,
                    "checkpoint_at": checkpoint_at,
                    "reason": reason.strip()[:500],
                    "incident_ref": incident_ref[:100],
                    "incident_url": incident_url[:500],
                    "created_by": actor if getattr(actor, "pk", None) else None,
                },
            )
            if new:
                created.append(credit)
        if created:
            record_event(
                actor,
                "chargeback.credit.create",
                target_type="chargeback.credit",
                target_id=",".join(str(c.pk) for c in created)[:100],
                target_label=f"{len(created)} credit(s) on {cluster.name}: {reason.strip()}"[:300],
                reason=reason.strip(),
                after={
                    "cluster": cluster.name,
                    "interrupted_at": interrupted_at,
                    "workloads": [c.backend_id for c in created],
                    "incident_ref": incident_ref,
                    "incident_url": incident_url,
                },
            )
    return created


def credit_drain(
    actor,
    cluster: Cluster,
    result,
    *,
    reason: str,
    incident_ref: str = "",
    incident_url: str = "",
    at: datetime | None = None,
) -> list[Credit]:
    """The hook for drains caused by a fault: credit every workload the drain evicted (a DrainResult)."""
    return credit_interruptions(
        actor,
        cluster=cluster,
        backend_ids=list(result.evicted),
        interrupted_at=at or backend_now(cluster),
        reason=reason or f"node {result.node} drained",
        incident_ref=incident_ref,
        incident_url=incident_url,
    )
