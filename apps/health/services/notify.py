"""What health tells people: incidents (to on-call and the owners of affected work), drains (to the owners of the
work they evict) and isolation storms.

The messages are written and delivered by the notifications app (apps/notifications), which inference
and chargeback use too; this module only says who hears of what, in which words.
"""

from __future__ import annotations

from collections import defaultdict

from django.conf import settings
from django.db import transaction

from apps.health.models import Incident
from apps.notifications.models import Notification
from apps.notifications.services import notify


def _link(path: str) -> str:
    return getattr(settings, "CONSOLE_BASE_URL", "").rstrip("/") + path


def _url(incident: Incident) -> str:
    return _link(f"/health/incidents/{incident.pk}/")


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
    tenants = set(incident.tenants.values_list("id", flat=True))
    notify(
        subject, text, oncall=True, tenant_ids=tenants, emails=sorted(_owner_emails(incident)), incident_id=incident.pk
    )


def notify_evicted(node, operation, workloads: list, *, by: str) -> int:
    """Tell the owners of the work a drain evicted (human or automatic): each tenant's channels and the submitters'
    e-mail, naming only that tenant's work. Returns how many messages were queued."""
    by_tenant: dict[int, list] = defaultdict(list)
    for workload in workloads:
        by_tenant[workload.tenant_id].append(workload)
    queued = 0
    with transaction.atomic():
        for tenant_id, mine in by_tenant.items():
            subject = f"[DRAIN] {node.name} drained by {by}: {len(mine)} workload(s) of {mine[0].tenant.slug} evicted"
            text = (
                f"{subject}\nEvicted: {', '.join(str(w) for w in mine)}\nReason: {operation.reason or 'none given'}\n"
                f"The cluster schedules them again where there is room. Operation #{operation.pk} "
                f"{_link(f'/operations/{operation.pk}/')}"
            )
            owners = sorted({w.created_by.email for w in mine if w.created_by_id and w.created_by.email})
            queued += notify(subject, text, oncall=False, tenant_ids=[tenant_id], emails=owners)
    return queued


def notify_storm(storm, text: str) -> None:
    notify("[STORM] GPU isolation budget used up", text, oncall=True)


def forget_incident_notifications(sender, instance: Incident, **kwargs) -> None:
    """An incident deleted (with its node's cluster) takes its notifications along, sent or not (post_delete)."""
    Notification.objects.filter(incident_id=instance.pk).delete()
