"""Notifications: Slack-compatible webhook JSON and e-mail, to on-call and to the owners of affected work.

Any app with news calls `notify` inside the transaction of the change it reports: the rows are written
there and sent by a task after commit. A send claims its row by compare-and-set (pending, same attempt
count), so a task delivered twice sends once. A failed send stays pending with backoff until MAX_ATTEMPTS;
the periodic sweep (`resend_due`, run by the health app's housekeeping) picks up lost tasks.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Iterable
from datetime import timedelta

from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.core.outbound import OutboundRefused, urlopen
from apps.notifications.models import ChannelKind, Notification, NotificationChannel, NotificationStatus

logger = logging.getLogger(__name__)

WEBHOOK_TIMEOUT_S = 5
ONCALL, OWNERS = "on-call", "owners"


def notify(
    subject: str,
    text: str,
    *,
    oncall: bool,
    tenant_ids: Iterable[int] = (),
    emails: Iterable[str] = (),
    incident_id: int | None = None,
) -> int:
    """Queue one message per enabled channel of on-call (when `oncall`) and of the tenants `tenant_ids` (their
    owners), and one e-mail per address of `emails` (owners too). Call inside the transaction that records what
    happened: the messages are sent after it commits. Returns how many were queued."""
    wanted = Q(tenant_id__in=set(tenant_ids))
    if oncall:
        wanted |= Q(tenant__isnull=True)
    rows = [
        _row(incident_id, c.kind, c.target, ONCALL if c.tenant_id is None else OWNERS, subject, text)
        for c in NotificationChannel.objects.filter(wanted, enabled=True)
    ]
    rows += [_row(incident_id, ChannelKind.EMAIL, email, OWNERS, subject, text) for email in emails]
    _queue(rows)
    return len(rows)


def _row(incident_id, kind: str, target: str, audience: str, subject: str, text: str) -> Notification:
    return Notification(
        incident_id=incident_id, kind=kind, target=target, audience=audience, subject=subject[:300], text=text
    )


def _queue(rows: list[Notification]) -> None:
    if not rows:
        return
    created = Notification.objects.bulk_create(rows)
    ids = [n.pk for n in created]

    def send():
        from apps.notifications.tasks import send_notification_task

        for pk in ids:
            send_notification_task.delay(pk)

    transaction.on_commit(send)


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
    request = urllib.request.Request(  # noqa: S310 - outbound.urlopen checks the URL and the address
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as response:
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
        # The outbound policy's refusal is final: a retry would be refused alike.
        failed = isinstance(exc, OutboundRefused) or notification.attempts + 1 >= Notification.MAX_ATTEMPTS
        Notification.objects.filter(pk=notification.pk).update(
            status=NotificationStatus.FAILED if failed else NotificationStatus.PENDING, last_error=str(exc)[:500]
        )
        logger.warning("notification %s to %s failed: %s", notification.pk, notification.target, exc)
        return "failed" if failed else "retry"
    Notification.objects.filter(pk=notification.pk).update(status=NotificationStatus.SENT, sent_at=timezone.now())
    return "sent"


def resend_due(limit: int = 200) -> int:
    """Pending notifications whose task was lost or whose backoff is over (attempt n waits 2^n × 10 s)."""
    from apps.notifications.tasks import send_notification_task

    now = timezone.now()
    count = 0
    for pk, attempts, created in Notification.objects.filter(status=NotificationStatus.PENDING).values_list(
        "pk", "attempts", "created_at"
    )[:limit]:
        if created + timedelta(seconds=10 * 2**attempts) <= now:
            send_notification_task.delay(pk)
            count += 1
    return count
