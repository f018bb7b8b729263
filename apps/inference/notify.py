"""The one seam every service alert goes through: `notify(event)`.

Now: the alert row (written by the caller) plus an audit event in the same transaction, so the audit log
shows when each alert fired and resolved. When the health app is installed, its notification channels
(webhook, e-mail) get the alert too through `apps.health.services.notify.notify_service_alert(subject,
text, tenant)`; the health app owns delivery, retries and the channels' audiences.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.apps import apps as django_apps

from apps.audit.services import record_event
from apps.inference.models import ServiceAlert

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AlertEvent:
    alert: ServiceAlert
    kind: str  # fired | resolved


def notify(event: AlertEvent) -> None:
    """Record and deliver one alert event. Call inside the transaction that writes the alert row."""
    alert = event.alert
    workload = alert.workload
    subject = f"[{alert.get_window_display()}] {workload}: {alert.get_sli_display()} SLO {event.kind}"
    record_event(
        None,
        f"inference.alert.{event.kind}",
        alert,
        tenant=workload.tenant,
        reason=alert.message,
        after={"sli": alert.sli, "window": alert.window, "state": alert.state, "burn_long": alert.burn_long},
        target_label=subject[:300],
    )
    if not django_apps.is_installed("apps.health"):
        return
    from apps.health.services import notify as health_notify

    deliver = getattr(health_notify, "notify_service_alert", None)
    if deliver is None:
        logger.warning("apps.health has no notify_service_alert(); alert %s recorded but not sent", alert.pk)
        return
    deliver(subject, alert.message, workload.tenant)
