"""Workloads (training jobs, inference services), their templates, events and the submission outbox."""

from __future__ import annotations

import enum

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from apps.accounts.models import TenantScopedQuerySet
from apps.core.validators import dns1123_label
from apps.workloads.reasons import RUNTIME_LIMIT_PREFIX


class TenantOwnedQuerySet(TenantScopedQuerySet):
    tenant_field = "tenant_id"


class WorkloadKind(models.TextChoices):
    TRAINING = "training", _("Training job")
    INFERENCE = "inference", _("Inference service")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("workload kind", "training"),
            pgettext_lazy("workload kind", "inference"),
        )
    )


class WorkloadState(models.TextChoices):
    PENDING = "pending", _("Pending (waiting for quota)")
    ADMITTED = "admitted", _("Admitted (being placed)")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    PREEMPTED = "preempted", _("Preempted")
    CANCELLING = "cancelling", _("Cancelling")
    CANCELLED = "cancelled", _("Cancelled")
    REJECTED = "rejected", _("Rejected")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("workload state", "pending"),
            pgettext_lazy("workload state", "admitted"),
            pgettext_lazy("workload state", "running"),
            pgettext_lazy("workload state", "succeeded"),
            pgettext_lazy("workload state", "failed"),
            pgettext_lazy("workload state", "preempted"),
            pgettext_lazy("workload state", "cancelling"),
            pgettext_lazy("workload state", "cancelled"),
            pgettext_lazy("workload state", "rejected"),
        )
    )

    @classmethod
    def terminal(cls) -> set[str]:
        return {cls.SUCCEEDED, cls.FAILED, cls.PREEMPTED, cls.CANCELLED, cls.REJECTED}


class WorkloadTemplate(models.Model):
    """A saved, versioned spec per tenant ("8×H100 pretrain"); saving a change adds a version."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="workload_templates")
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField(default=1)
    kind = models.CharField(max_length=20, choices=WorkloadKind.choices)
    description = models.CharField(max_length=300, blank=True)
    spec = models.JSONField()
    created_by = models.ForeignKey("accounts.User", null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantOwnedQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__path", "name", "-version"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name", "version"], name="template_version_unique")]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Workload(models.Model):
    """One training job or inference service, from submission to its end.

    `backend_name` is fixed at creation (derived from the id), so a resubmission after a crash
    reaches the backend under the same name and the backend's idempotent submit returns the same job.
    """

    kind = models.CharField(max_length=20, choices=WorkloadKind.choices)
    name = models.CharField(max_length=63, validators=[dns1123_label])
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="workloads")
    queue = models.ForeignKey("tenancy.Queue", on_delete=models.PROTECT, related_name="workloads")
    # Every index is written on each submission: none that another index already covers (cluster: cluster_state;
    # created_by: the idempotency key's unique index), none for what is never searched (tier: only PROTECT checks).
    tier = models.ForeignKey("tenancy.PriorityTier", on_delete=models.PROTECT, related_name="+", db_index=False)
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.PROTECT, related_name="workloads", db_index=False)
    gpu_model = models.ForeignKey("fleet.GpuModel", on_delete=models.PROTECT, related_name="+")
    gpus = models.FloatField(help_text="GPUs the workload holds (fractions for shared GPUs)")
    spec = models.JSONField()
    template = models.ForeignKey(WorkloadTemplate, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    admission = models.OneToOneField(
        "tenancy.Admission", null=True, blank=True, on_delete=models.SET_NULL, related_name="workload"
    )
    state = models.CharField(max_length=20, choices=WorkloadState.choices, default=WorkloadState.PENDING)
    state_reason = models.CharField(max_length=500, blank=True)
    backend_name = models.CharField(max_length=63, blank=True)
    placements = models.JSONField(default=list, blank=True)
    requeues = models.PositiveIntegerField(default=0)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    request_hash = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(
        "accounts.User", null=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The job's own progress signal (POST .../heartbeat/): only the latest is kept, and no audit event per beat.
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)

    objects = TenantOwnedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],  # NULL keys are distinct: no condition needed
                name="workload_idempotency_key_per_user",
                violation_error_message="This idempotency key was already used.",
            ),
        ]
        indexes = [
            models.Index(fields=["cluster", "state"], name="workload_cluster_state"),
            models.Index(fields=["state"], name="workload_state"),  # equality only: no LIKE twin
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name}"

    @property
    def is_finished(self) -> bool:
        return self.state in WorkloadState.terminal()

    @property
    def stopped_by_runtime_limit(self) -> bool:
        """Its (current) run failed because the backend stopped it at the spec's max_runtime_s: neither a fault's
        doing nor the code's. A fault does not requeue it, and chargeback credits nobody for it."""
        return self.state == WorkloadState.FAILED and self.state_reason.startswith(RUNTIME_LIMIT_PREFIX)

    def run_name(self, attempt: int = 0) -> str:
        """The backend's name for the workload's `attempt`-th run (0: the first). A requeued workload gets a new
        name so that the backend's idempotent submit starts a new run instead of returning the finished one."""
        prefix = f"wl{self.pk}r{attempt}" if attempt else f"wl{self.pk}"
        return f"{prefix}-{self.name}"[:63].rstrip("-")


class WorkloadEvent(models.Model):
    """A line of the workload's timeline: state changes, backend messages, placements."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    time = models.DateTimeField(auto_now_add=True)
    kind = models.CharField(max_length=40)
    message = models.CharField(max_length=1000)

    class Meta:
        ordering = ["time", "id"]

    def __str__(self) -> str:
        return f"{self.time:%H:%M:%S} {self.kind}: {self.message}"


class ReplicaStart(models.Model):
    """One inference replica's cold start, from its scheduling onto a node to serving, as its cluster reported it
    (a pod's PodScheduled and Ready conditions on Kubernetes, the simulator's replicas). Recorded by reconcile when
    the replica is first seen, completed when it serves: an observation of the cluster, like the timeline's cluster
    events, not a change anyone made."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="replica_starts")
    replica = models.CharField(max_length=253)
    node = models.CharField(max_length=253, blank=True)
    scheduled_at = models.DateTimeField()
    ready_at = models.DateTimeField(null=True, blank=True, help_text="empty while it is still starting")
    seconds = models.FloatField(null=True, blank=True, help_text="scheduled to ready")

    class Meta:
        ordering = ["ready_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["workload", "replica"], name="replicastart_once_per_replica"),
        ]

    def __str__(self) -> str:
        return f"{self.replica}: {self.seconds:.0f} s" if self.seconds is not None else f"{self.replica}: starting"


class OutboxAction(models.TextChoices):
    SUBMIT = "submit", _("Submit")
    CANCEL = "cancel", _("Cancel")
    PREEMPT = "preempt", _("Preempt")


class OutboxStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    PROCESSING = "processing", _("Processing")
    DONE = "done", _("Done")
    FAILED = "failed", _("Failed")


class OutboxEntry(models.Model):
    """Backend work written in the same transaction as the change that needs it, carried out by a task.

    A worker claims an entry by conditional UPDATE and renews the claim (a lease of settings.OUTBOX_LEASE_S)
    while its backend call runs; one that dies mid-call leaves it `processing` until the lease runs out, and
    the next sweep takes it again (counting an attempt). Backends submit idempotently by name on every
    attempt after the first, so the retry cannot create a second job.
    """

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="outbox")
    action = models.CharField(max_length=20, choices=OutboxAction.choices)
    # The workload's run the entry acts on (its `requeues` when written): a requeued workload's new run has its
    # own submit entry, and the first run's finished one is no proof that the new run reached the backend.
    run = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=20, choices=OutboxStatus.choices, default=OutboxStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()  # outbox_due serves the drain
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="outbox_due")]

    def __str__(self) -> str:
        return f"{self.action} {self.workload_id} [{self.status}]"
