"""Periodic upkeep: prune old rollups, close incidents that stayed quiet, resume what automation isolated."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.audit.services import record_event
from apps.health.models import ISOLATING_ACTIONS, Incident, IncidentState, IsolationOwner, NodeHealth, NodeRollup
from apps.health.services.incidents import add_event, transition_incident


def prune_rollups(older_than_days: int | None = None) -> int:
    """Delete minute rollups older than the retention (HEALTH_ROLLUP_DAYS, 30 by default)."""
    days = older_than_days if older_than_days is not None else settings.HEALTH_ROLLUP_DAYS
    cutoff = timezone.now() - timedelta(days=days)
    with transaction.atomic():
        deleted, _ = NodeRollup.objects.filter(minute__lt=cutoff).delete()
        if deleted:
            record_event(
                None,
                "health.rollups.prune",
                target_type="health.noderollup",
                target_label=f"{deleted} minutes before {cutoff:%Y-%m-%d}",
                after={"deleted": deleted},
            )
    return deleted


def close_quiet_incidents() -> dict:
    """Incidents whose cause has not fired for HEALTH_QUIET_S are closed by automation where that is safe.

    - `detected` incidents that never isolate (record, alert) resolve: the condition cleared by itself.
    - `validating` incidents resolve: the repaired node stayed clean. If automation isolated the node (and
      nothing else is open on it) automation resumes it; a node a human isolated stays out of service.
    """
    from apps.health.services.runbook import node_action, running_operation

    quiet_since = timezone.now() - timedelta(seconds=settings.HEALTH_QUIET_S)
    quiet = Incident.objects.open().filter(clean_since__lte=quiet_since).select_related("node")
    resolved = resumed = 0
    for incident in quiet.filter(state=IncidentState.DETECTED).exclude(action__in=ISOLATING_ACTIONS):
        transition_incident(
            None, incident, IncidentState.RESOLVED, f"cleared: no finding since {incident.clean_since:%H:%M:%S}"
        )
        resolved += 1
    for incident in quiet.filter(state=IncidentState.VALIDATING):
        node = incident.node
        owner = NodeHealth.objects.filter(pk=node.pk).values_list("isolated_by", flat=True).first()
        others_open = Incident.objects.open().filter(node=node).exclude(pk=incident.pk).exists()
        if owner == IsolationOwner.AUTO and not others_open and running_operation(node) is None:
            node_action(
                None,
                node,
                "resume",
                reason=f"validated: incident #{incident.pk} quiet since {incident.clean_since:%H:%M:%S}",
                incident=incident,
            )
            resumed += 1
            continue
        transition_incident(
            None, incident, IncidentState.RESOLVED, f"validated: quiet since {incident.clean_since:%H:%M:%S}"
        )
        if owner == IsolationOwner.HUMAN:
            add_event(incident, None, "note", "the node stays out of service: a human isolated it")
        resolved += 1
    return {"resolved": resolved, "resumed": resumed}
