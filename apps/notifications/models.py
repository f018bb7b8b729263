"""Notification channels and the messages queued for them.

The tables keep their names from when they belonged to the health app (`health_notificationchannel`,
`health_notification`): health, inference and chargeback all send through this app, which sits below them.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.fleet.models import FleetQuerySet


class ChannelKind(models.TextChoices):
    WEBHOOK = "webhook", _("Webhook (Slack-compatible JSON)")
    EMAIL = "email", _("E-mail")


class NotificationChannel(models.Model):
    """Where notifications go: on-call's channels (no tenant) or a tenant's (owners of affected work)."""

    tenant = models.ForeignKey("accounts.Tenant", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=10, choices=ChannelKind.choices)
    target = models.CharField(max_length=500, help_text="webhook URL or e-mail address")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = FleetQuerySet.as_manager()

    class Meta:
        db_table = "health_notificationchannel"
        ordering = ["tenant__slug", "kind", "target"]

    def __str__(self) -> str:
        return f"{self.kind} {self.target} ({self.tenant.slug if self.tenant_id else 'on-call'})"


class NotificationStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    SENT = "sent", _("Sent")
    FAILED = "failed", _("Failed")


class Notification(models.Model):
    """One message to one destination, written with the change that needs it and sent by a task (retried)."""

    MAX_ATTEMPTS = 5

    # The health incident it reports, when it reports one: its id only, as this app sits below health
    # (health deletes an incident's notifications with it).
    incident_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    kind = models.CharField(max_length=10, choices=ChannelKind.choices)
    target = models.CharField(max_length=500)
    audience = models.CharField(max_length=20, help_text="on-call or owners")
    subject = models.CharField(max_length=300)
    text = models.TextField()
    status = models.CharField(max_length=10, choices=NotificationStatus.choices, default=NotificationStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "health_notification"
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.kind} to {self.target}: {self.subject}"
