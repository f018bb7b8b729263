"""Notifications: Slack-compatible webhook JSON and e-mail, to on-call and to the owners of affected work.

Rows are written in the transaction of the change they report and sent by a task after commit; a send
claims its row by compare-and-set (pending, same attempt count), so a task delivered twice sends once.
A failed send stays pending with backoff until MAX_ATTEMPTS; the periodic sweep picks up lost tasks.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.health.models import ChannelKind, Incident, Notification, NotificationChannel, NotificationStatus

logger = logging.getLogger(__name__)

WEBHOOK_TIMEOUT_S = 5
ONCALL, OWNERS = "on-call", "owners"


def _url(incident: Incident) -> str:
    base = getattr(settings, "CONSOLE_BASE_URL", "").rstrip("/")
    return f"{base}/health/incidents/{incident.pk}/" if base else f"/health/incidents/{incident.pk}/"


def _queue(rows: list[Notification]) -> None:
    if not rows:
        return
    created = Notification.objects.bulk_create(rows)
    ids = [n.pk for n in created]

    def send():
        from apps.health.tasks import send_notification_task

        for pk in ids:
            send_notification_task.delay(pk)

    transaction.on_commit(send)


def _owner_emails(incident: Incident) -> set[str]:
    return {
        email
        for email in incident.workloads.exclude(created_by__isnull=True).values_list("created_by__email", flat=True)
        if email
    }


def notify_incident(incident: Incident, event: str, detail: str) -> None:
    """Tell on-call (every incident that alerts or isolates) and the owners of affected work what happened."""
    if incident.action == "record" and event != "closed":
        return  # recorded findings are on the board, not in anyone's inbox
    subject = f"[{incident.severity.upper()}] {incident.title}: {event}"
    text = (
        f"{subject}\n{detail}\nNode {incident.node.name} · state {incident.state} · incident #{incident.pk} "
        f"{_url(incident)}"
    )
    rows = []
    tenants = set(incident.tenants.values_list("id", flat=True))
    channels = NotificationChannel.objects.filter(Q(tenant__isnull=True) | Q(tenant_id__in=tenants), enabled=True)
    for channel in channels:
        audience = ONCALL if channel.tenant_id is None else OWNERS
        rows.append(_row(incident, channel.kind, channel.target, audience, subject, text))
    for email in sorted(_owner_emails(incident)):
        rows.append(_row(incident, ChannelKind.EMAIL, email, OWNERS, subject, text))
    _queue(rows)


def notify_storm(storm, text: str) -> None:
    subject = "[STORM] GPU isolation budget used up"
    channels = NotificationChannel.objects.filter(tenant__isnull=True, enabled=True)
    _queue([_row(None, c.kind, c.target, ONCALL, subject, text) for c in channels])


def notify_service_alert(subject: str, text: str, tenant) -> None:
    """An inference service's SLO alert (apps.inference.notify): on-call channels and the tenant's channels.

    `tenant` owns the service; channels of its ancestors count too (a team's service reaches its organization's
    channel). Call inside the transaction that records the alert.
    """
    owners = set(tenant.ancestor_ids())  # the tenant and its ancestors
    channels = NotificationChannel.objects.filter(Q(tenant__isnull=True) | Q(tenant_id__in=owners), enabled=True)
    _queue([_row(None, c.kind, c.target, ONCALL if c.tenant_id is None else OWNERS, subject, text) for c in channels])


def notify_tenant_owners(subject: str, text: str, tenant) -> int:
    """A message for a tenant's owners (e.g. a spend budget crossing a threshold): the channels of the tenant
    and of its ancestors, not on-call's. Call inside the transaction that records what happened."""
    channels = NotificationChannel.objects.filter(tenant_id__in=set(tenant.ancestor_ids()), enabled=True)
    rows = [_row(None, c.kind, c.target, OWNERS, subject, text) for c in channels]
    _queue(rows)
    return len(rows)


def _row(incident, kind: str, target: str, audience: str, subject: str, text: str) -> Notification:
    return Notification(
        incident=incident, kind=kind, target=target, audience=audience, subject=subject[:300], text=text
    )


def slack_payload(notification: Notification) -> dict:
    """Slack's incoming-webhook shape (also accepted by Mattermost, Rocket.Chat and Teams' Slack mode)."""
    return {
        "text": notification.subject,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": notification.subject[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": notification.text[:2900]}},
        ],
    }


def _post(url: str, payload: dict) -> None:
    request = urllib.request.Request(  # noqa: S310 - http(s) checked when the channel is saved
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as response:  # noqa: S310
        if response.status >= 300:
            raise OSError(f"HTTP {response.status}")


def send_notification(notification_id: int) -> str:
    """Send one notification; returns sent / retry / failed / skipped."""
    notification = Notification.objects.filter(pk=notification_id, status=NotificationStatus.PENDING).first()
    if notification is None:
        return "skipped"
    claimed = Notification.objects.filter(
        pk=notification.pk, status=NotificationStatus.PENDING, attempts=notification.attempts
    ).update(attempts=F("attempts") + 1)
    if not claimed:
        return "skipped"
    try:
        if notification.kind == ChannelKind.WEBHOOK:
            _post(notification.target, slack_payload(notification))
        else:
            send_mail(notification.subject, notification.text, None, [notification.target])
    except Exception as exc:  # any transport failure is retried, then reported on the row
        failed = notification.attempts + 1 >= Notification.MAX_ATTEMPTS
        Notification.objects.filter(pk=notification.pk).update(
            status=NotificationStatus.FAILED if failed else NotificationStatus.PENDING, last_error=str(exc)[:500]
        )
        logger.warning("notification %s to %s failed: %s", notification.pk, notification.target, exc)
        return "failed" if failed else "retry"
    Notification.objects.filter(pk=notification.pk).update(status=NotificationStatus.SENT, sent_at=timezone.now())
    return "sent"


def resend_due(limit: int = 200) -> int:
    """Pending notifications whose task was lost or whose backoff is over (attempt n waits 2^n × 10 s)."""
    from apps.health.tasks import send_notification_task

    now = timezone.now()
    count = 0
    for pk, attempts, created in Notification.objects.filter(status=NotificationStatus.PENDING).values_list(
        "pk", "attempts", "created_at"
    )[:limit]:
        if created + timedelta(seconds=10 * 2**attempts) <= now:
            send_notification_task.delay(pk)
            count += 1
    return count
