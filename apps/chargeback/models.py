"""Chargeback: metered GPU usage, rate cards, periods and their statements, credits and spend budgets.

Money is `Decimal` everywhere (DecimalField here). A usage record lies inside one period, one UTC
day and one rate card's effective span: metering splits at period and day boundaries, and a rate
change splits the open period's records at its effective time. So every sum a statement or a chart
needs is a plain GROUP BY over the records, priced by the record's own `rate_card`.

Records and credits of a closed period cannot change: the services refuse, and on PostgreSQL a
trigger refuses any INSERT, UPDATE or DELETE that touches a closed period (migration 0002).
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import TenantScopedQuerySet

CENT = Decimal("0.01")
SECONDS_PER_HOUR = Decimal(3600)


class PeriodState(models.TextChoices):
    OPEN = "open", _("Open")
    CLOSED = "closed", _("Closed")


class Period(models.Model):
    """A billing period [start, end) (a UTC calendar month). Closing it locks its records and writes statements."""

    start = models.DateTimeField(unique=True)
    end = models.DateTimeField()
    state = models.CharField(max_length=10, choices=PeriodState.choices, default=PeriodState.OPEN)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-start"]
        constraints = [models.CheckConstraint(condition=Q(end__gt=models.F("start")), name="period_end_after_start")]

    def __str__(self) -> str:
        return f"{self.start:%Y-%m}"

    @property
    def label(self) -> str:
        return f"{self.start:%Y-%m}"

    @property
    def is_closed(self) -> bool:
        return self.state == PeriodState.CLOSED


class RateCard(models.Model):
    """The price of one GPU-hour of a model (optionally for one tier) from `effective_from` on.

    Rows are never edited: a new price is a new row, so the history stays. A tier-specific card
    wins over the model's default card for that tier once it is effective.
    """

    gpu_model = models.ForeignKey("fleet.GpuModel", on_delete=models.PROTECT, related_name="+")
    tier = models.ForeignKey(
        "tenancy.PriorityTier",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="empty: every tier without its own card",
    )
    rate = models.DecimalField(max_digits=12, decimal_places=6, help_text="per GPU-hour")
    currency = models.CharField(max_length=3)
    effective_from = models.DateTimeField()
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["gpu_model__name", "tier__name", "-effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_model", "tier", "effective_from"],
                name="ratecard_one_per_model_tier_time",
                nulls_distinct=False,
                violation_error_message="A rate for this model and tier already starts at that time.",
            ),
            models.CheckConstraint(condition=Q(rate__gte=0), name="ratecard_rate_not_negative"),
        ]

    def __str__(self) -> str:
        tier = self.tier.name if self.tier_id else "any tier"
        since = f"{self.effective_from:%Y-%m-%d %H:%M}"
        return f"{self.gpu_model.code} ({tier}) {self.rate} {self.currency}/GPU-h from {since}"


class MeterWatermark(models.Model):
    """How far (in the backend's own clock) a cluster's usage has been metered; the next run reads from here."""

    cluster = models.OneToOneField("fleet.Cluster", on_delete=models.CASCADE, related_name="meter_watermark")
    metered_until = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.cluster} metered until {self.metered_until:%Y-%m-%d %H:%M:%S}"


class UsageQuerySet(TenantScopedQuerySet):
    tenant_field = "tenant_id"


class UsageRecord(models.Model):
    """GPU time one workload held on one GPU model over [start, end), inside one period, day and rate span.

    `gpus` is the GPUs held, fractions included (a 1g.10gb MIG slice is 1/7); `gpu_seconds` is
    gpus × seconds. `idle_gpu_seconds` / `used_gpu_seconds` come from the GPU utilization rollups
    (null: no utilization known for this record).
    """

    period = models.ForeignKey(Period, on_delete=models.PROTECT, related_name="records")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.PROTECT, related_name="+")
    tenant = models.ForeignKey("accounts.Tenant", null=True, on_delete=models.PROTECT, related_name="+")
    queue = models.ForeignKey("tenancy.Queue", null=True, on_delete=models.PROTECT, related_name="+")
    tier = models.ForeignKey("tenancy.PriorityTier", null=True, on_delete=models.PROTECT, related_name="+")
    gpu_model = models.ForeignKey("fleet.GpuModel", null=True, on_delete=models.PROTECT, related_name="+")
    workload = models.ForeignKey("workloads.Workload", null=True, on_delete=models.SET_NULL, related_name="+")
    rate_card = models.ForeignKey(RateCard, null=True, on_delete=models.PROTECT, related_name="+")
    backend_id = models.CharField(max_length=253)
    backend_model = models.CharField(max_length=100, help_text="the GPU model as the backend named it")
    start = models.DateTimeField()
    end = models.DateTimeField()
    run_started_at = models.DateTimeField(null=True, help_text="start of the run this is part of, when known")
    gpus = models.DecimalField(max_digits=14, decimal_places=9)
    seconds = models.DecimalField(max_digits=14, decimal_places=6)
    gpu_seconds = models.DecimalField(max_digits=20, decimal_places=6)
    idle_gpu_seconds = models.DecimalField(max_digits=20, decimal_places=6, null=True)
    used_gpu_seconds = models.DecimalField(max_digits=20, decimal_places=6, null=True)

    objects = UsageQuerySet.as_manager()

    class Meta:
        ordering = ["start", "id"]
        constraints = [
            # Re-metering the same interval inserts nothing twice. Two pieces of one workload may start
            # together and end apart (a pod that finished early): the end is part of the key.
            models.UniqueConstraint(
                fields=["cluster", "backend_id", "backend_model", "start", "end"], name="usage_unique_per_workload_span"
            ),
            models.CheckConstraint(condition=Q(end__gt=models.F("start")), name="usage_end_after_start"),
            models.CheckConstraint(condition=Q(gpus__gte=0), name="usage_gpus_not_negative"),
        ]
        indexes = [
            models.Index(fields=["period", "tenant"], name="usage_period_tenant"),
            models.Index(fields=["workload", "end"], name="usage_workload_end"),
            models.Index(fields=["gpu_model", "start"], name="usage_model_start"),
            models.Index(fields=["cluster", "end"], name="usage_cluster_end"),
            models.Index(fields=["cluster", "start"], name="usage_cluster_start"),
        ]

    def __str__(self) -> str:
        return f"{self.backend_id} {self.gpus} × {self.backend_model} {self.start:%Y-%m-%d %H:%M}–{self.end:%H:%M}"


class UsageDay(models.Model):
    """Usage records summed per cluster, UTC day and statement key: what statements, charts and budgets read.

    Rebuilt from the records for every (cluster, day) that metering or a rate change touches, in the
    same transaction (rollup.py), so it always equals the records' sums; a month of 1.5 M records is a
    few hundred thousand rows here. Locked with its period like the records.
    """

    period = models.ForeignKey(Period, on_delete=models.PROTECT, related_name="+")
    day = models.DateField()
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.PROTECT, related_name="+")
    tenant = models.ForeignKey("accounts.Tenant", null=True, on_delete=models.PROTECT, related_name="+")
    queue = models.ForeignKey("tenancy.Queue", null=True, on_delete=models.PROTECT, related_name="+")
    tier = models.ForeignKey("tenancy.PriorityTier", null=True, on_delete=models.PROTECT, related_name="+")
    gpu_model = models.ForeignKey("fleet.GpuModel", null=True, on_delete=models.PROTECT, related_name="+")
    rate_card = models.ForeignKey(RateCard, null=True, on_delete=models.PROTECT, related_name="+")
    gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6)
    idle_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6)
    used_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6)
    records = models.PositiveIntegerField()

    objects = UsageQuerySet.as_manager()

    class Meta:
        ordering = ["day", "id"]
        indexes = [models.Index(fields=["period", "day", "cluster"], name="usageday_period_day")]

    def __str__(self) -> str:
        return f"{self.day} {self.tenant_id}/{self.gpu_model_id}: {self.gpu_seconds} GPU-s"


class CreditState(models.TextChoices):
    PENDING = "pending", _("Pending (waiting for the usage to be metered)")
    SETTLED = "settled", _("Settled")


class CreditQuerySet(TenantScopedQuerySet):
    tenant_field = "tenant_id"


class Credit(models.Model):
    """GPU time lost to a hardware fault: the interrupted run's GPU time since its last checkpoint or start.

    `interrupted_at` is in the backend's clock (as usage records are). Keyed by the backend's workload
    id, so work submitted outside the console (an sbatch on the cluster) is credited too. The incident is linked by
    reference (`incident_ref`, `incident_url`) so the health app's incidents can point here without a
    foreign key in either direction.
    """

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.PROTECT, related_name="+")
    backend_id = models.CharField(max_length=253, help_text="the interrupted workload as the backend names it")
    workload = models.ForeignKey("workloads.Workload", null=True, on_delete=models.SET_NULL, related_name="+")
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    queue = models.ForeignKey("tenancy.Queue", null=True, on_delete=models.PROTECT, related_name="+")
    tier = models.ForeignKey("tenancy.PriorityTier", null=True, on_delete=models.PROTECT, related_name="+")
    gpu_model = models.ForeignKey("fleet.GpuModel", null=True, on_delete=models.PROTECT, related_name="+")
    period = models.ForeignKey(Period, on_delete=models.PROTECT, related_name="credits")
    rate_card = models.ForeignKey(RateCard, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    interrupted_at = models.DateTimeField()
    checkpoint_at = models.DateTimeField(null=True, blank=True, help_text="the last checkpoint before the fault")
    run_started_at = models.DateTimeField(null=True, blank=True, help_text="where the lost time starts")
    gpus = models.DecimalField(max_digits=14, decimal_places=9, default=Decimal(0))
    gpu_seconds = models.DecimalField(max_digits=20, decimal_places=6, default=Decimal(0))
    state = models.CharField(max_length=10, choices=CreditState.choices, default=CreditState.PENDING)
    reason = models.CharField(max_length=500)
    incident_ref = models.CharField(max_length=100, blank=True, help_text="the incident's id")
    incident_url = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = CreditQuerySet.as_manager()

    class Meta:
        ordering = ["-interrupted_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "backend_id", "interrupted_at"], name="credit_one_per_interruption"
            ),
        ]

    def __str__(self) -> str:
        return f"credit {self.backend_id} at {self.interrupted_at:%Y-%m-%d %H:%M}"


class SpendBudget(models.Model):
    """A tenant's monthly money budget (its whole subtree's spend), its alert thresholds and its policy.

    `over_since` is kept by the periodic budget check so that admission reads one small row instead of
    summing usage.
    """

    tenant = models.OneToOneField("accounts.Tenant", on_delete=models.CASCADE, related_name="spend_budget")
    monthly_amount = models.DecimalField(max_digits=16, decimal_places=2)
    currency = models.CharField(max_length=3)
    thresholds = models.JSONField(default=list, help_text="percentages that raise an alert, e.g. [50, 80, 100]")
    block_preemptible_when_over = models.BooleanField(
        default=False, help_text="stop admitting preemptible work once the month's spend reaches the budget"
    )
    over_since = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(monthly_amount__gte=0), name="spendbudget_not_negative")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.monthly_amount} {self.currency}/month"


class BudgetAlert(models.Model):
    """A threshold of a spend budget crossed in a period (each at most once per period)."""

    budget = models.ForeignKey(SpendBudget, on_delete=models.CASCADE, related_name="alerts")
    period = models.ForeignKey(Period, on_delete=models.CASCADE, related_name="+")
    threshold = models.PositiveIntegerField()
    spend = models.DecimalField(max_digits=16, decimal_places=2)
    fired_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-fired_at"]
        constraints = [
            models.UniqueConstraint(fields=["budget", "period", "threshold"], name="budgetalert_once_per_period")
        ]

    def __str__(self) -> str:
        return f"{self.budget.tenant.slug} passed {self.threshold}% in {self.period}"


class StatementQuerySet(TenantScopedQuerySet):
    tenant_field = "tenant_id"


class Statement(models.Model):
    """A tenant's bill for a closed period: its own and its subtenants' usage, credits and idle waste."""

    period = models.ForeignKey(Period, on_delete=models.CASCADE, related_name="statements")
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    currency = models.CharField(max_length=3)
    gpu_hours = models.DecimalField(max_digits=20, decimal_places=6)
    usage_amount = models.DecimalField(max_digits=16, decimal_places=2)
    credit_gpu_hours = models.DecimalField(max_digits=20, decimal_places=6)
    credit_amount = models.DecimalField(max_digits=16, decimal_places=2)
    idle_gpu_hours = models.DecimalField(max_digits=20, decimal_places=6)
    idle_amount = models.DecimalField(max_digits=16, decimal_places=2)
    total = models.DecimalField(max_digits=16, decimal_places=2, help_text="usage minus credits")
    computed_at = models.DateTimeField()

    objects = StatementQuerySet.as_manager()

    class Meta:
        ordering = ["-period__start", "tenant__path"]
        constraints = [models.UniqueConstraint(fields=["period", "tenant"], name="statement_one_per_tenant_period")]

    def __str__(self) -> str:
        return f"{self.tenant.slug} {self.period}"


class LineKind(models.TextChoices):
    USAGE = "usage", _("Usage")
    CREDIT = "credit", _("Credit")


class StatementLine(models.Model):
    """One priced row: GPU-hours of one (tenant in the subtree, model, queue, tier, rate); credits are negative."""

    statement = models.ForeignKey(Statement, on_delete=models.CASCADE, related_name="lines")
    kind = models.CharField(max_length=10, choices=LineKind.choices)
    source_tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    gpu_model = models.ForeignKey("fleet.GpuModel", null=True, on_delete=models.PROTECT, related_name="+")
    queue = models.ForeignKey("tenancy.Queue", null=True, on_delete=models.PROTECT, related_name="+")
    tier = models.ForeignKey("tenancy.PriorityTier", null=True, on_delete=models.PROTECT, related_name="+")
    rate = models.DecimalField(max_digits=12, decimal_places=6, null=True, help_text="empty: no rate card applied")
    gpu_hours = models.DecimalField(max_digits=20, decimal_places=6)
    amount = models.DecimalField(max_digits=16, decimal_places=2)
    idle_gpu_hours = models.DecimalField(max_digits=20, decimal_places=6, default=Decimal(0))
    idle_amount = models.DecimalField(max_digits=16, decimal_places=2, default=Decimal(0))
    incident_ref = models.CharField(max_length=100, blank=True)
    incident_url = models.CharField(max_length=500, blank=True)
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.gpu_hours} GPU-h = {self.amount}"
