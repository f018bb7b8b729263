"""The one seam every service alert goes through: `notify(event)`.

The alert row (written by the caller) plus an audit event in the same transaction, so the audit log shows
when each alert fired and resolved; and the notification channels (webhook, e-mail: on-call's and those of
the owning tenant and its ancestors, so a team's service reaches its organization's channel) through the
notifications app, which queues the messages in the same transaction and owns delivery and retries.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.audit.services import record_event
from apps.inference.models import ServiceAlert
from apps.notifications.services import notify as send


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
    send(subject, f"{subject}\n{alert.message}", oncall=True, tenant_ids=workload.tenant.ancestor_ids())
