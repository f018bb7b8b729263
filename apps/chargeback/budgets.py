"""Spend against monthly budgets: cost to date, month-end forecast, threshold alerts, the admission policy.

Cost to date is the current period's usage priced by each record's rate card, for the tenant's
whole subtree (as its statement would show it, before credits). The forecast adds the last three
days' run rate for the rest of the month. The periodic check raises each threshold once per period
(a BudgetAlert, one audit event, and the `budget_threshold_crossed` signal for notifiers) and keeps
`SpendBudget.over_since`. A spent budget whose policy says so holds the tenant's preemptible work: the
admission hold lives in tenancy (`sync_hold`), which submission reads without knowing about budgets.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import django.dispatch
from django.db import transaction
from django.db.models import DecimalField, F, Q, Sum
from django.utils import timezone

from apps.accounts.models import Tenant
from apps.audit.services import record_event
from apps.chargeback.models import SECONDS_PER_HOUR, BudgetAlert, Period, SpendBudget, UsageDay
from apps.chargeback.periods import current_period
from apps.chargeback.statements import money
from apps.notifications.services import notify
from apps.tenancy.services.holds import hold_preemptible, lift_hold

# Sent once per threshold and period: sender=SpendBudget, budget=, threshold=, spend=, period=.
budget_threshold_crossed = django.dispatch.Signal()
RUN_RATE_WINDOW = timedelta(days=3)


def _cost_by_tenant(period: Period, since: datetime | None = None, within: Tenant | None = None) -> dict[int, Decimal]:
    rows = UsageDay.objects.filter(period=period, tenant__isnull=False)
    if within is not None:
        rows = rows.filter(tenant_id__in=Tenant.objects.subtree_of(within).values("id"))
    if since is not None:  # whole days: the run rate is a per-day figure
        rows = rows.filter(day__gte=since.date())
    priced = rows.values("tenant_id").annotate(
        cost=Sum(F("gpu_seconds") * F("rate_card__rate"), output_field=DecimalField(max_digits=30, decimal_places=12))
    )
    return {r["tenant_id"]: Decimal(r["cost"] or 0) / SECONDS_PER_HOUR for r in priced}


def subtree_costs(period: Period, since: datetime | None = None, within: Tenant | None = None) -> dict[int, Decimal]:
    """Each tenant's subtree cost in `period` (unrounded), from one grouped query (of `within`'s subtree only)."""
    own = _cost_by_tenant(period, since, within)
    path_of = dict(Tenant.objects.values_list("id", "path"))
    out: dict[int, Decimal] = {}
    for tenant_id, cost in own.items():
        for ancestor in (int(p) for p in path_of.get(tenant_id, "").strip("/").split("/") if p):
            out[ancestor] = out.get(ancestor, Decimal(0)) + cost
    return out


def subtree_spend(
    period: Period, since: datetime, tenant_ids: set[int] | None = None, paths: dict[int, str] | None = None
) -> tuple[dict[int, Decimal], dict[int, Decimal]]:
    """Each tenant's subtree cost in `period`, and the part of it since `since` (whole days), unrounded.

    One grouped query over the per-day rollup, summed per tenant and rate card (with the card's rate, joined after
    the grouping's key) and priced here (a third cheaper than multiplying every row in SQL), and one for the tenant
    tree. The period is matched by its start, so an unsaved `Period` (not created yet: no usage) reads nothing. With
    `tenant_ids`, only the subtrees of those tenants are read (and returned). `paths` ({tenant id: path}, every
    tenant) saves the tenant tree's query.
    """
    if paths is None:
        paths = dict(Tenant.objects.values_list("id", "path"))
    rows = UsageDay.objects.filter(period__start=period.start, tenant__isnull=False)
    keep = None
    if tenant_ids is not None:
        prefixes = tuple(paths[t] for t in tenant_ids if t in paths)
        keep = {t for t, path in paths.items() if prefixes and path.startswith(prefixes)}
        rows = rows.filter(tenant_id__in=keep)
    sums = list(
        rows.values("tenant_id", "rate_card_id", "rate_card__rate")
        .annotate(seconds=Sum("gpu_seconds"), recent=Sum("gpu_seconds", filter=Q(day__gte=since.date())))
        .values_list("tenant_id", "rate_card__rate", "seconds", "recent")
        .order_by()
    )
    total: dict[int, Decimal] = {}
    recent: dict[int, Decimal] = {}
    for tenant_id, rate, seconds, recent_seconds in sums:
        if rate is None:  # not priced yet: no cost, as in statements
            continue
        for ancestor in (int(p) for p in paths.get(tenant_id, "").strip("/").split("/") if p):
            if keep is not None and ancestor not in keep:
                continue
            total[ancestor] = total.get(ancestor, Decimal(0)) + seconds * rate / SECONDS_PER_HOUR
            recent[ancestor] = recent.get(ancestor, Decimal(0)) + (recent_seconds or 0) * rate / SECONDS_PER_HOUR
    return total, recent


@dataclass
class Spend:
    tenant: Tenant
    period: Period
    cost_to_date: Decimal
    forecast: Decimal
    budget: SpendBudget | None

    @property
    def used_pct(self) -> Decimal | None:
        if self.budget is None or not self.budget.monthly_amount:
            return None
        return (self.cost_to_date * 100 / self.budget.monthly_amount).quantize(Decimal("0.1"))

    @property
    def forecast_pct(self) -> Decimal | None:
        if self.budget is None or not self.budget.monthly_amount:
            return None
        return (self.forecast * 100 / self.budget.monthly_amount).quantize(Decimal("0.1"))


def forecast(cost_to_date: Decimal, recent: Decimal, period: Period, now: datetime) -> Decimal:
    """Cost to date plus the recent run rate over what is left of the period."""
    if now >= period.end:
        return cost_to_date
    window_start = max(period.start, now - RUN_RATE_WINDOW)
    window = (now - window_start).total_seconds()
    if window <= 0:
        return cost_to_date
    remaining = Decimal(str((period.end - now).total_seconds()))
    return cost_to_date + recent / Decimal(str(window)) * remaining


def spend_of(tenant: Tenant, now: datetime | None = None) -> Spend:
    now = now or timezone.now()
    period = current_period(now)
    costs = subtree_costs(period, within=tenant)
    recent = subtree_costs(period, since=max(period.start, now - RUN_RATE_WINDOW), within=tenant)
    cost = costs.get(tenant.pk, Decimal(0))
    return Spend(
        tenant=tenant,
        period=period,
        cost_to_date=money(cost),
        forecast=money(forecast(cost, recent.get(tenant.pk, Decimal(0)), period, now)),
        budget=SpendBudget.objects.filter(tenant=tenant).first(),
    )


def _notify_owners(budget: SpendBudget, threshold: int, spend: Decimal, pct: Decimal, period: Period) -> None:
    """The tenant's notification channels (and its parents', not on-call's) hear of each threshold crossed, once."""
    tenant = budget.tenant
    subject = f"{tenant.slug}: {threshold} % of the {period} GPU budget spent"
    text = (
        f"{tenant.name} ({tenant.slug}) has spent {spend} {budget.currency} of its monthly budget of "
        f"{budget.monthly_amount} {budget.currency} ({pct:.1f} %) in {period}."
    )
    if budget.block_preemptible_when_over and threshold >= 100:
        text += " Preemptible work is no longer admitted until the budget is raised or the month ends."
    notify(subject, text, oncall=False, tenant_ids=tenant.ancestor_ids())


def check_budgets(now: datetime | None = None) -> int:
    """Raise alerts for thresholds crossed this period and keep `over_since` current. Returns alerts raised."""
    now = now or timezone.now()
    period = current_period(now)
    budgets = list(SpendBudget.objects.select_related("tenant"))
    if not budgets:
        return 0
    costs = subtree_costs(period)
    fired = set(BudgetAlert.objects.filter(period=period).values_list("budget_id", "threshold"))
    raised = 0
    for budget in budgets:
        spend = money(costs.get(budget.tenant_id, Decimal(0)))
        pct = spend * 100 / budget.monthly_amount if budget.monthly_amount else Decimal(0)
        over = (budget.monthly_amount == 0 and spend > 0) or (budget.monthly_amount and spend >= budget.monthly_amount)
        if bool(over) != (budget.over_since is not None):
            budget.over_since = now if over else None
            with transaction.atomic():
                SpendBudget.objects.filter(pk=budget.pk).update(over_since=budget.over_since)
                sync_hold(budget)
        for threshold in budget.thresholds:
            if pct < threshold or (budget.pk, threshold) in fired:
                continue
            with transaction.atomic():
                alert = BudgetAlert.objects.create(budget=budget, period=period, threshold=threshold, spend=spend)
                record_event(
                    None,
                    "chargeback.budget.alert",
                    budget,
                    tenant=budget.tenant,
                    reason=f"{budget.tenant.slug} spent {spend} {budget.currency} of {budget.monthly_amount} "
                    f"({pct:.1f} %) in {period}: past {threshold} %",
                    after={"threshold": threshold, "spend": spend, "period": period.label, "alert": alert.pk},
                )
                _notify_owners(budget, threshold, spend, pct, period)
                transaction.on_commit(
                    lambda b=budget, t=threshold, s=spend: budget_threshold_crossed.send(
                        sender=SpendBudget, budget=b, threshold=t, spend=s, period=period
                    )
                )
            raised += 1
    return raised


def sync_hold(budget: SpendBudget) -> None:
    """Hold the tenant's preemptible work while its budget is spent and its policy says so; lift it otherwise.

    Called wherever `over_since` or the policy changes (the periodic check, setting the budget), in the
    transaction that changes them, so that admission's hold and the budget never disagree.
    """
    if budget.block_preemptible_when_over and budget.over_since is not None:
        hold_preemptible(
            budget.tenant_id, since=budget.over_since, amount=budget.monthly_amount, currency=budget.currency
        )
    else:
        lift_hold(budget.tenant_id)
