"""Audit events: who did what to which object, why, and what it looked like before and after."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from apps.core import tenant_scope


class AppendOnlyError(Exception):
    """Raised on any attempt to change or delete an audit event."""


class AuditEventQuerySet(models.QuerySet):
    def for_user(self, user, action: str) -> AuditEventQuerySet:
        """Events of tenants the user may view, plus the user's own actions; console-wide viewers see all.

        Audit sits below accounts, so it asks apps.core.tenant_scope, where accounts registers its
        permission answer (apps.accounts.permissions.allowed_tenant_ids).
        """
        ids = tenant_scope.allowed_tenant_ids(user, action)
        if ids is None:
            return self
        return self.filter(Q(tenant_id__in=ids) | Q(actor_id=user.pk))

    def update(self, **kwargs):
        raise AppendOnlyError("Audit events are append-only.")

    def delete(self):
        raise AppendOnlyError("Audit events are append-only.")


class AuditEvent(models.Model):
    """One state change. Rows are never updated or deleted (PostgreSQL enforces it with a trigger too).

    Foreign keys are kept without database constraints so the trail survives deletion of the user,
    token or tenant it names; the `*_label` fields keep the names readable after that.
    """

    time = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    actor_label = models.CharField(max_length=200)
    token = models.ForeignKey(
        "accounts.ApiToken", null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    # One row per state change: only the indexes the audit pages search by (the action filter is a
    # case-insensitive prefix, which no btree serves; target_type and tenant lead composite indexes).
    action = models.CharField(max_length=100)
    target_type = models.CharField(max_length=100)
    target_id = models.CharField(max_length=100, blank=True)
    target_label = models.CharField(max_length=300, blank=True)
    tenant = models.ForeignKey(
        "accounts.Tenant",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    tenant_label = models.CharField(max_length=100, blank=True)
    reason = models.TextField(blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [
            models.Index(fields=["tenant", "-time"], name="audit_tenant_time"),
            models.Index(fields=["target_type", "target_id"], name="audit_target"),
            models.Index(fields=["request_id"], name="audit_request"),  # equality only: no LIKE twin
        ]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.actor_label} {self.action} {self.target_label}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("Audit events are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("Audit events are append-only.")
