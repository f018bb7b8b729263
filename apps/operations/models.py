"""Long operations as rows the UI and API can show while they run."""

from __future__ import annotations

import enum

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class OperationStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("operation status", "pending"),
            pgettext_lazy("operation status", "running"),
            pgettext_lazy("operation status", "succeeded"),
            pgettext_lazy("operation status", "failed"),
        )
    )


class OperationQuerySet(models.QuerySet):
    def for_user(self, user, action: str) -> OperationQuerySet:
        """Operations on tenants the user may view, plus the user's own; console-wide viewers see all."""
        from apps.accounts.permissions import allowed_tenant_ids

        ids = allowed_tenant_ids(user, action)
        if ids is None:
            return self
        return self.filter(Q(tenant_id__in=ids) | Q(actor_id=user.pk))


class Operation(models.Model):
    """One long-running piece of work: a drain, a quota push, an inventory sync.

    A Celery task claims the row with a conditional UPDATE (pending → running), so a message
    delivered twice runs the work once. A worker that dies leaves a stale heartbeat; after
    `LEASE_SECONDS` the row may be claimed again.
    """

    LEASE_SECONDS = 600

    kind = models.CharField(max_length=100, db_index=True)
    status = models.CharField(
        max_length=20, choices=OperationStatus.choices, default=OperationStatus.PENDING, db_index=True
    )
    target_type = models.CharField(max_length=100, blank=True)
    target_id = models.CharField(max_length=100, blank=True)
    target_label = models.CharField(max_length=300, blank=True)
    tenant = models.ForeignKey("accounts.Tenant", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor = models.ForeignKey("accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    reason = models.TextField(blank=True)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    progress = models.FloatField(default=0.0, help_text="0 to 100")
    # Countable progress for the UI ("3 of 8 workloads evicted"): set by handlers that know their steps.
    steps_done = models.PositiveIntegerField(default=0)
    steps_total = models.PositiveIntegerField(default=0)
    steps_label = models.CharField(max_length=100, blank=True, help_text='What a step is, e.g. "workloads evicted"')
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = OperationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=100),
                name="operation_progress_0_100",
                violation_error_message="Progress is a percentage from 0 to 100.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.target_label or ''} [{self.status}]".strip()

    @property
    def is_finished(self) -> bool:
        return self.status in {OperationStatus.SUCCEEDED, OperationStatus.FAILED}

    @property
    def duration(self):
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None


class SchedulerLease(models.Model):
    """The one row that Celery beat's schedulers hold in turn, so that only one of them sends (apps/operations/beat.py).

    Two or more beat processes run for availability; the one whose `holder` is written here with an `expires_at`
    still in the future is the active one. Taking and renewing it is one conditional UPDATE timed by the database's
    clock, never the processes' own clocks (which may disagree).
    """

    ROW_ID = 1

    id = models.PositiveSmallIntegerField(primary_key=True, default=ROW_ID)
    holder = models.CharField(max_length=200, blank=True, help_text="host:pid:nonce of the active scheduler")
    expires_at = models.DateTimeField(help_text="The lease ends here unless renewed (database time)")
    acquired_at = models.DateTimeField(null=True, blank=True, help_text="When the current holder took it")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="schedulerlease_one_row"),
        ]

    def __str__(self) -> str:
        return f"beat lease: {self.holder or 'nobody'} until {self.expires_at:%Y-%m-%d %H:%M:%S}"
