"""Queues, quotas, guarantee caps and admission: how the tenants share the GPU fleet.

The tenant tree itself (`Tenant`, `TenantScopedQuerySet`) lives in apps.accounts, below this app.
"""

from __future__ import annotations

from fractions import Fraction

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

# Also imported from here by the apps above (for now).
from apps.accounts.models import Tenant, TenantScopedQuerySet
from apps.backends.shares import SHARE_UNITS, format_share, to_units
from apps.core.validators import dns1123_label


class QueueQuerySet(TenantScopedQuerySet):
    tenant_field = "tenant_id"


class QuotaQuerySet(TenantScopedQuerySet):
    tenant_field = "queue__tenant_id"


class PriorityTier(models.Model):
    """A workload priority class: its value, whether it can be preempted, whether it may borrow quota."""

    name = models.CharField(max_length=63, unique=True, validators=[dns1123_label])
    value = models.IntegerField(help_text="higher runs first and is preempted last")
    preemptible = models.BooleanField(default=True)
    may_borrow = models.BooleanField(default=True)
    description = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-value"]

    def __str__(self) -> str:
        return self.name


class Queue(models.Model):
    """Where a tenant's workloads wait and run; holds the tenant's GPU quota, per GPU model."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="queues")
    name = models.CharField(max_length=63, validators=[dns1123_label])
    description = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = QueueQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__path", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "name"],
                name="queue_unique_per_tenant",
                violation_error_message="This tenant already has a queue with that name.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name}"

    @property
    def full_name(self) -> str:
        return f"{self.tenant.slug}-{self.name}"


class QueueBinding(models.Model):
    """Where a queue lives on one cluster: Kubernetes namespaces and/or a Slurm account."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="bindings")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="queue_bindings")
    namespaces = models.JSONField(default=list, blank=True)
    slurm_account = models.CharField(max_length=63, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "cluster"], name="binding_one_per_cluster")]

    def __str__(self) -> str:
        return f"{self.queue} on {self.cluster}"


class Quota(models.Model):
    """A queue's quota for one GPU model (Kueue nominalQuota / borrowingLimit / lendingLimit, per flavor)."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="quotas")
    gpu_model = models.ForeignKey("fleet.GpuModel", on_delete=models.PROTECT, related_name="+")
    guaranteed = models.PositiveIntegerField(default=0)
    borrow_limit = models.PositiveIntegerField(null=True, blank=True, help_text="empty: unlimited")
    lend_limit = models.PositiveIntegerField(null=True, blank=True, help_text="empty: all of the unused guarantee")
    weight = models.FloatField(default=1.0)
    per_user_limit = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = QuotaQuerySet.as_manager()

    class Meta:
        ordering = ["queue__tenant__path", "queue__name", "gpu_model__name"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "gpu_model"], name="quota_one_per_model"),
            models.CheckConstraint(
                condition=Q(lend_limit__isnull=True) | Q(lend_limit__lte=models.F("guaranteed")),
                name="quota_lend_within_guarantee",
                violation_error_message="The lend limit cannot exceed the guarantee.",
            ),
            models.CheckConstraint(
                condition=Q(weight__gt=0),
                name="quota_weight_positive",
                violation_error_message="The weight must be positive.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.queue} {self.gpu_model.code}: {self.guaranteed}"


class GuaranteeCap(models.Model):
    """The most guarantee a tenant's subtree may hold for one GPU model; children must fit inside it.

    Pages and the API call it the tenant's budget (/api/v1/budgets/); money budgets are chargeback's.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="guarantee_caps")
    gpu_model = models.ForeignKey("fleet.GpuModel", on_delete=models.PROTECT, related_name="+")
    guaranteed = models.PositiveIntegerField()

    objects = TenantScopedQuerySet.as_manager()

    # Audit events name their target by model label; caps were "tenancy.tenantbudget" before the rename,
    # and the trail (and saved filters on it) keep that name.
    audit_target_type = "tenancy.tenantbudget"

    class Meta:
        verbose_name = "tenant budget"  # what the API schema and messages have always called it
        constraints = [models.UniqueConstraint(fields=["tenant", "gpu_model"], name="guarantee_cap_one_per_model")]

    def __str__(self) -> str:
        return f"{self.tenant.slug} {self.gpu_model.code}: {self.guaranteed}"


class AdmissionHold(models.Model):
    """A pause on preemptible work for a tenant's whole subtree, kept by an app above tenancy.

    Chargeback keeps it (apps/chargeback/budgets.py): it stands while the tenant's spend budget is spent and
    the budget's policy stops preemptible work, and goes when that is no longer so. Submission reads it in
    its context query and refuses preemptible tiers; `amount` and `currency` are the spent budget, for the
    refusal's message. Not audited: the budget alert that set it is.
    """

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="admission_hold")
    since = models.DateTimeField()
    amount = models.DecimalField(max_digits=16, decimal_places=2)
    currency = models.CharField(max_length=3)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantScopedQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.tenant.slug}: preemptible work paused since {self.since:%Y-%m-%d %H:%M}"


class AdmissionState(models.TextChoices):
    PENDING = "pending", _("Pending")
    ADMITTED = "admitted", _("Admitted")
    REJECTED = "rejected", _("Rejected")
    RELEASED = "released", _("Released")


class AdmissionQuerySet(TenantScopedQuerySet):
    tenant_field = "queue__tenant_id"


class Admission(models.Model):
    """A workload's claim on quota (Kueue's Workload object): pending with a reason, admitted, or released.

    The workloads app creates one per workload and releases it when the workload ends; the admission
    pass admits pending ones in order. The claim counts its GPU share exactly, in units of 1/SHARE_UNITS GPU
    (apps/backends/shares.py: a 1/7 MIG slice is 1/7 of a GPU of quota). `cluster` is where it runs;
    `borrowed_from` records which queues (or, under "-1", the unguaranteed capacity) lent how many units.
    A pending head of its queue may hold a reservation (`reserved_units` from `expected_start`,
    apps/tenancy/reservations.py).
    """

    name = models.CharField(max_length=253)  # what made the claim and for what: "workload:<tenant>/<name>"
    # admission_queue_use leads with the queue: a second index on it would only cost every INSERT.
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="admissions", db_index=False)
    gpu_model = models.ForeignKey("fleet.GpuModel", on_delete=models.PROTECT, related_name="+")
    # Nothing searches claims by cluster alone (the decisions' sums filter by model first): no index of its own.
    cluster = models.ForeignKey(
        "fleet.Cluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    gpu_units = models.BigIntegerField(help_text="the GPU share, in units of 1/SHARE_UNITS of a GPU")
    gang = models.PositiveIntegerField(default=1)
    tier = models.ForeignKey(PriorityTier, on_delete=models.PROTECT, related_name="+")
    user = models.CharField(max_length=150, blank=True)
    state = models.CharField(max_length=20, choices=AdmissionState.choices, default=AdmissionState.PENDING)
    decision = models.CharField(max_length=20, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    borrowed_from = models.JSONField(default=dict, blank=True)
    reclaim_plan = models.JSONField(default=list, blank=True)
    max_runtime_s = models.PositiveIntegerField(null=True, blank=True, help_text="the workload's runtime limit")
    submitted_at = models.DateTimeField(db_index=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True, help_text="admitted_at + max_runtime_s")
    released_at = models.DateTimeField(null=True, blank=True)
    reserved_units = models.BigIntegerField(default=0, help_text="held for this pending head of its queue")
    expected_start = models.DateTimeField(null=True, blank=True, help_text="when its reservation is expected to start")
    holds_cluster = models.BooleanField(default=False, help_text="its reservation holds its cluster's GPUs too")

    objects = AdmissionQuerySet.as_manager()

    class Meta:
        ordering = ["submitted_at", "id"]
        indexes = [
            # Pending claims by model; and every queue's use of a model from the index alone (a full queue's
            # decision reads all lenders' use under the admission lock).
            models.Index(
                fields=["state", "gpu_model"], include=["queue", "gpu_units"], name="admission_state_model_units"
            ),
            # Every decision sums its queue's admitted units under the admission lock: from the index alone.
            models.Index(
                fields=["queue", "gpu_model", "state"], include=["gpu_units"], name="admission_queue_use_units"
            ),
            # ... and what others borrowed from it: only borrowing claims are worth reading.
            models.Index(
                fields=["gpu_model"],
                condition=models.Q(state="admitted") & ~models.Q(borrowed_from={}),
                name="admission_borrowing",
            ),
            # Pending heads holding a reservation with a known start (a few per model): decisions read them.
            models.Index(
                fields=["gpu_model", "cluster"],
                condition=models.Q(state="pending") & models.Q(expected_start__isnull=False),
                name="admission_reserved",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.gpus_text} × {self.gpu_model.code}, {self.state})"

    @property
    def gpus(self) -> Fraction:
        """The claim's GPUs, exactly (3/7 for three 1g.10gb slices)."""
        return Fraction(self.gpu_units, SHARE_UNITS)

    @gpus.setter
    def gpus(self, value: int | Fraction) -> None:
        self.gpu_units = to_units(value)

    @property
    def gpus_text(self) -> str:
        return format_share(self.gpu_units, SHARE_UNITS)

    @property
    def label(self) -> str:
        """The claim as people read it: "a/gang" (its name without the prefix that says what made it)."""
        from apps.tenancy.reservations import claim_label

        return claim_label(self.name)


class QuotaRequestState(models.TextChoices):
    PENDING = "pending", _("Pending")
    APPROVED = "approved", _("Approved")
    PARTIAL = "partial", _("Approved in part")
    REJECTED = "rejected", _("Rejected")


class QuotaRequestQuerySet(TenantScopedQuerySet):
    tenant_field = "queue__tenant_id"


class QuotaRequest(models.Model):
    """A tenant admin's request for more quota, decided by a platform admin."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="quota_requests")
    gpu_model = models.ForeignKey("fleet.GpuModel", on_delete=models.PROTECT, related_name="+")
    guaranteed = models.PositiveIntegerField(help_text="the guarantee asked for (the new total)")
    borrow_limit = models.PositiveIntegerField(null=True, blank=True)
    justification = models.TextField(max_length=4000)
    requested_by = models.ForeignKey("accounts.User", null=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=20, choices=QuotaRequestState.choices, default=QuotaRequestState.PENDING)
    granted = models.PositiveIntegerField(null=True, blank=True)
    decided_by = models.ForeignKey("accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    decision_reason = models.TextField(blank=True, max_length=4000)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    objects = QuotaRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.queue} {self.gpu_model.code} → {self.guaranteed} ({self.state})"
