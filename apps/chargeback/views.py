"""Chargeback pages: spend and waste charts, statements (printable, CSV, JSON), periods, rate cards, tenant spend."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts.models import Tenant
from apps.accounts.permissions import allowed_tenant_ids, has_perm
from apps.accounts.roles import Action
from apps.chargeback import reports, services
from apps.chargeback.budgets import spend_of
from apps.chargeback.exports import csv_response, export_name, line_rows, to_json
from apps.chargeback.filtersets import StatementFilterSet
from apps.chargeback.forms import PeriodActionForm, RateCardForm, SpendBudgetForm
from apps.chargeback.models import BudgetAlert, Period, RateCard, Statement
from apps.chargeback.periods import current_period, month_start
from apps.chargeback.statements import compute_statements
from apps.core.errors import ServiceError
from apps.core.forms import apply_service_error
from apps.core.tables import Column
from apps.core.views import ScopedListView


def _period_from(request) -> Period:
    label = request.GET.get("period", "")
    try:
        start = datetime.strptime(label, "%Y-%m").replace(tzinfo=UTC) if label else None
    except ValueError:
        start = None
    if start is None:
        return current_period()
    return Period.objects.filter(start=month_start(start)).first() or current_period()


@require_GET
@login_required
def overview(request):
    period = _period_from(request)
    visible = allowed_tenant_ids(request.user, Action.VIEW)
    tenant = getattr(request, "current_tenant", None)
    if tenant:  # the switcher narrows to one tenant's subtree (a lazy object: test its truth)
        subtree = set(Tenant.objects.subtree_of(tenant).values_list("id", flat=True))
        visible = subtree if visible is None else visible & subtree
    charts = {
        "by_tenant": reports.spend_by_day(period, visible, "tenant__slug"),
        "by_model": reports.spend_by_day(period, visible, "gpu_model__code"),
        "use": reports.allocation_vs_use(period, visible),
    }
    return render(
        request,
        "chargeback/overview.html",
        {
            "period": period,
            "periods": Period.objects.all()[:24],
            "charts": charts,
            "waste": reports.waste_by_tenant(period, visible),
            "idle_workloads": reports.top_idle_workloads(period, visible),
            "currency": settings.CHARGEBACK_CURRENCY,
        },
    )


class StatementListView(ScopedListView):
    """Statements of closed (and reopened) periods, plus links to the open periods' live drafts."""

    model = Statement
    filterset_class = StatementFilterSet
    select_related = ("period", "tenant")
    template_name = "chargeback/statement_list.html"
    columns = [
        Column("period", gettext_lazy("Period"), order_by="period__start", csv="period.label"),
        Column("tenant", gettext_lazy("Tenant"), order_by="tenant__path", csv="tenant.slug"),
        Column("gpu_hours", gettext_lazy("GPU-h"), order_by="gpu_hours", css="text-end"),
        Column("usage", gettext_lazy("Usage"), order_by="usage_amount", csv="usage_amount", css="text-end"),
        Column("credits", gettext_lazy("Credits"), order_by="credit_amount", csv="credit_amount", css="text-end"),
        Column("idle", gettext_lazy("Idle waste"), order_by="idle_amount", csv="idle_amount", css="text-end"),
        Column("total", gettext_lazy("Total"), order_by="total", css="text-end"),
        Column("currency", gettext_lazy("Currency"), csv="currency", shown=False),
        Column("links", gettext_lazy("Formats"), csv=False),
    ]
    csv_name = "statements"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["open_periods"] = Period.objects.filter(state="open").order_by("-start")[:3]
        context["tenants"] = Tenant.objects.for_user(self.request.user, Action.VIEW).order_by("path")[:200]
        return context


def _statement(request, pk: int) -> Statement:
    return get_object_or_404(
        Statement.objects.for_user(request.user, Action.VIEW).select_related("period", "tenant"), pk=pk
    )


def _draft(request, slug: str) -> Statement:
    """A live statement of an open period (?period=YYYY-MM, not stored): what closing it now would write."""
    tenant = get_object_or_404(Tenant.objects.for_user(request.user, Action.VIEW), slug=slug)
    try:
        start = datetime.strptime(request.GET.get("period", ""), "%Y-%m").replace(tzinfo=UTC)
    except ValueError:
        raise Http404("No such period: give ?period=YYYY-MM.") from None
    period = get_object_or_404(Period, start=start)
    stored = Statement.objects.filter(period=period, tenant=tenant).select_related("period", "tenant").first()
    if period.is_closed and stored is not None:
        return stored
    (statement,) = compute_statements(period, [tenant])
    return statement


def _render_statement(request, statement: Statement, *, draft: bool):
    fmt = request.GET.get("format")
    if fmt == "csv":
        return csv_response(statement)
    if fmt == "json":
        response = JsonResponse(to_json(statement))
        response["Content-Disposition"] = f'attachment; filename="{export_name(statement, "json")}"'
        return response
    rows = line_rows(statement)
    return render(
        request,
        "chargeback/statement_detail.html",
        {
            "statement": statement,
            "usage_rows": [r for r in rows if r["kind"] == "usage"],
            "credit_rows": [r for r in rows if r["kind"] == "credit"],
            "draft": draft,
        },
    )


@require_GET
@login_required
def statement_detail(request, pk: int):
    statement = _statement(request, pk)
    return _render_statement(request, statement, draft=not statement.period.is_closed)


@require_GET
@login_required
def statement_draft(request, slug: str):
    statement = _draft(request, slug)
    return _render_statement(request, statement, draft=statement.pk is None or not statement.period.is_closed)


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def period_list(request):
    can_administer = has_perm(request.user, Action.ADMINISTER)
    if request.method == "POST":
        period = get_object_or_404(Period, pk=request.POST.get("period"))
        form = PeriodActionForm(request.POST)
        form.is_valid()
        reason = form.cleaned_data.get("reason", "")
        try:
            if request.POST.get("action") == "reopen":
                services.reopen_period(request.user, period, reason=reason)
                messages.success(request, _("Period %(period)s reopened.") % {"period": period})
            else:
                services.close_period(request.user, period, reason=reason)
                messages.success(
                    request, _("Period %(period)s closed; its statements are written.") % {"period": period}
                )
        except ServiceError as exc:
            messages.error(request, exc.message)
        return redirect("chargeback:period_list")
    now = timezone.now()
    return render(
        request,
        "chargeback/period_list.html",
        {
            "rows": [
                (p, services.unmetered_clusters(p) if not p.is_closed and p.end <= now else [])
                for p in Period.objects.select_related("closed_by")[:36]
            ],
            "now": now,
            "can_administer": can_administer,
        },
    )


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def rate_cards(request):
    can_edit = has_perm(request.user, Action.ADMINISTER)
    # "Change" on a row opens the form filled with that rate, from now on: a new rate is a new row.
    initial = {key: request.GET[key] for key in ("gpu_model", "tier", "rate", "note") if request.GET.get(key)}
    if initial:
        initial["effective_from"] = timezone.now().replace(second=0, microsecond=0)
    form = RateCardForm(request.POST or None, initial=initial) if can_edit else None
    if form is not None and request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            services.set_rate(
                request.user,
                gpu_model=data["gpu_model"],
                tier=data["tier"],
                rate=data["rate"],
                effective_from=data["effective_from"],
                note=data["note"],
            )
        except ServiceError as exc:
            apply_service_error(form, exc)
        else:
            messages.success(request, _("Rate saved; earlier rates stay in the history."))
            return redirect("chargeback:rate_cards")
    cards = list(RateCard.objects.select_related("gpu_model", "tier", "created_by"))
    seen = set()
    for card in cards:  # ordered newest first per model and tier: the newest is the one to change
        card.newest = (card.gpu_model_id, card.tier_id) not in seen
        seen.add((card.gpu_model_id, card.tier_id))
    return render(
        request,
        "chargeback/rate_cards.html",
        {
            "cards": cards,
            "form": form,
            "can_edit": can_edit,
        },
    )


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def tenant_spend(request, slug: str):
    """The tenant page's spend panel (loaded into it): cost to date, forecast, budget, alerts, and the budget form."""
    tenant = get_object_or_404(Tenant.objects.for_user(request.user, Action.VIEW).select_related("parent"), slug=slug)
    manager = tenant.parent if tenant.parent_id else None
    can_set = has_perm(request.user, Action.MANAGE, manager) if manager else has_perm(request.user, Action.ADMINISTER)
    spend = spend_of(tenant)
    initial = {}
    if spend.budget is not None:
        initial = {
            "monthly_amount": spend.budget.monthly_amount,
            "thresholds": ", ".join(str(t) for t in spend.budget.thresholds),
            "block_preemptible_when_over": spend.budget.block_preemptible_when_over,
        }
    form = SpendBudgetForm(request.POST or None, initial=initial) if can_set else None
    if form is not None and request.method == "POST" and form.is_valid():
        try:
            services.set_spend_budget(request.user, tenant=tenant, **form.cleaned_data)
        except ServiceError as exc:
            apply_service_error(form, exc)
        else:
            messages.success(request, _("Spend budget saved."))
            return redirect("tenancy:tenant_detail", slug=tenant.slug)
    return render(
        request,
        "chargeback/_tenant_spend.html",
        {
            "tenant": tenant,
            "spend": spend,
            "currency": settings.CHARGEBACK_CURRENCY,
            "form": form,
            "alerts": BudgetAlert.objects.filter(budget__tenant=tenant, period=spend.period).order_by("threshold"),
        },
    )
