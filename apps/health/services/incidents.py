"""Incidents: opened (deduplicated per node and cause) from findings, moved through their states by service calls.

Every transition names its actor (None: the health automation) and a reason, adds a timeline line and
writes one audit event in the same transaction.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import actor_label, record_event
from apps.core.errors import Conflict, InvalidInput
from apps.core.value_labels import value_label
from apps.fleet.models import Node
from apps.health.models import (
    SEVERITY_RANK,
    TRANSITIONS,
    Incident,
    IncidentEvent,
    IncidentState,
    RuleAction,
)
from apps.health.rules import INCIDENT_TITLE, Finding

MAX_EVIDENCE = 50
# A workload that ended this long before the fault was seen may still have been killed by it.
FAULT_LOOKBACK = timedelta(minutes=15)


def add_event(incident: Incident, actor, kind: str, message: str, from_state: str = "", to_state: str = "") -> None:
    IncidentEvent.objects.create(
        incident=incident,
        actor_label=actor_label(actor) if actor is not None else "health automation",
        kind=kind,
        from_state=from_state,
        to_state=to_state,
        message=message[:1000],
    )


def _worst(findings: list[Finding]) -> Finding:
    return max(findings, key=lambda f: (SEVERITY_RANK[f.severity], f.action != RuleAction.RECORD))


def _gpus(findings: list[Finding]) -> list[dict]:
    seen = {}
    for finding in findings:
        if finding.gpu and finding.gpu not in seen:
            seen[finding.gpu] = {"index": int(finding.gpu), "uuid": finding.uuid}
    return sorted(seen.values(), key=lambda g: g["index"])


def _link_work(incident: Incident, node: Node) -> None:
    """Link the workloads on the node (and so their tenants): a cordon or drain touches all of them."""
    from apps.workloads.placements import placed_on_node

    workloads = placed_on_node(node.cluster_id, node.name, ended_since=incident.detected_at - FAULT_LOOKBACK)
    if workloads:
        incident.workloads.add(*workloads)
        incident.tenants.add(*{w.tenant_id for w in workloads})


def record_findings(node_id: int, findings: list[Finding], version: int, at) -> list[Incident]:
    """Open or update one incident per cause firing on the node; then let isolation consider new ones."""
    from apps.health.services.isolation import consider_isolation
    from apps.health.services.notify import notify_incident

    node = Node.objects.select_related("cluster", "pool").get(pk=node_id)
    by_cause: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        by_cause[finding.cause].append(finding)
    touched = []
    for cause, group in sorted(by_cause.items()):
        worst = _worst(group)
        evidence = [f.as_evidence(at, version) for f in group]
        with transaction.atomic():
            incident = Incident.objects.select_for_update().open().filter(node=node, cause=cause).first()
            if incident is None:
                try:
                    with transaction.atomic():
                        incident = Incident.objects.create(
                            node=node,
                            cause=cause,
                            rule_key=worst.rule,
                            ruleset_version=version,
                            title=INCIDENT_TITLE % {"rule": worst.title, "node": node.name},
                            severity=worst.severity,
                            action=worst.action,
                            evidence=evidence,
                            gpus=_gpus(group),
                            detected_at=at,
                            last_seen_at=at,
                        )
                except IntegrityError:  # another worker opened it a moment ago: update that one
                    incident = Incident.objects.select_for_update().open().get(node=node, cause=cause)
                else:
                    _link_work(incident, node)
                    add_event(incident, None, "detected", worst.text, to_state=IncidentState.DETECTED)
                    record_event(
                        None,
                        "incident.open",
                        incident,
                        reason=worst.text,
                        after={"severity": incident.severity, "action": incident.action, "cause": cause},
                    )
                    notify_incident(incident, "opened", worst.text)
                    touched.append(incident)
                    continue
            _update(incident, worst, group, evidence, at)
            touched.append(incident)
    for incident in touched:
        if incident.state == IncidentState.DETECTED and not incident.waiting_for:
            consider_isolation(incident.pk)
    return touched


def _update(incident: Incident, worst: Finding, group: list[Finding], evidence: list[dict], at) -> None:
    from apps.health.services.notify import notify_incident

    incident.evidence = (incident.evidence + evidence)[-MAX_EVIDENCE:]
    incident.occurrences += 1
    incident.last_seen_at, incident.clean_since = at, None
    known = {g["index"] for g in incident.gpus}
    incident.gpus = sorted(
        incident.gpus + [g for g in _gpus(group) if g["index"] not in known], key=lambda g: g["index"]
    )
    fields = ["evidence", "occurrences", "last_seen_at", "clean_since", "gpus", "updated_at"]
    if SEVERITY_RANK[worst.severity] > SEVERITY_RANK[incident.severity]:
        before = {"severity": incident.severity, "action": incident.action}
        incident.severity, incident.action, incident.rule_key = worst.severity, worst.action, worst.rule
        incident.waiting_for = ""  # a worse finding is a new question for automation
        fields += ["severity", "action", "rule_key", "waiting_for"]
        incident.save(update_fields=fields)
        add_event(incident, None, "escalated", f"escalated to {worst.severity}: {worst.text}")
        record_event(
            None,
            "incident.escalate",
            incident,
            reason=worst.text,
            before=before,
            after={"severity": incident.severity, "action": incident.action},
        )
        notify_incident(incident, "escalated", worst.text)
        return
    incident.save(update_fields=fields)
    add_event(incident, None, "finding", worst.text)


def transition_incident(actor, incident: Incident, to_state: str, reason: str) -> Incident:
    """Move an incident to `to_state` if the state machine allows it. `actor` None is the health automation."""
    if actor is not None:
        require(actor, Action.OPERATE, None, _("Only on-call engineers and platform admins move incidents."))
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput(_("Say why (a reason is required)."), {"reason": _("Required.")})
    if to_state not in IncidentState.values:
        raise InvalidInput(
            _("Unknown state %(to_state)s.") % {"to_state": repr(to_state)},
            {"to": _("One of: %(values)s.") % {"values": ", ".join(IncidentState.values)}},
        )
    with transaction.atomic():
        locked = Incident.objects.select_for_update().get(pk=incident.pk)
        allowed = locked.allowed_transitions()
        if to_state not in allowed:
            raise Conflict(
                _("Incident #%(id)s is %(state)s; it can go to %(allowed)s, not %(to)s.")
                % {
                    "id": locked.pk,
                    "state": value_label(locked.state, "incident state"),
                    "allowed": ", ".join(value_label(s, "incident state") for s in allowed) or _("nothing (closed)"),
                    "to": value_label(to_state, "incident state"),
                },
                {
                    "to": _("Allowed now: %(values)s.")
                    % {"values": ", ".join(value_label(s, "incident state") for s in allowed) or _("none")}
                },
            )
        before = locked.state
        locked.state = to_state
        fields = ["state", "updated_at"]
        if not locked.is_open:
            locked.closed_at = timezone.now()
            fields.append("closed_at")
        if to_state != IncidentState.DETECTED and locked.waiting_for:
            locked.waiting_for = ""
            fields.append("waiting_for")
        locked.save(update_fields=fields)
        add_event(locked, actor, "transition", reason, from_state=before, to_state=to_state)
        record_event(
            actor, "incident.transition", locked, reason=reason, before={"state": before}, after={"state": to_state}
        )
        if to_state in {IncidentState.RESOLVED, IncidentState.FALSE_POSITIVE}:
            from apps.health.services.notify import notify_incident

            notify_incident(locked, "closed", f"{to_state}: {reason}")
    return locked


def advance_incident(actor, incident: Incident, path: list[str], reason: str) -> Incident:
    """Walk the incident along `path` as far as the state machine allows from where it is (skipping states it
    has passed). Used by runbook actions: a drain moves an isolated incident to draining, then drained."""
    current = Incident.objects.get(pk=incident.pk)
    for state in path:
        if state == current.state or state not in TRANSITIONS.get(current.state, ()):
            continue
        current = transition_incident(actor, current, state, reason)
    return current


def set_waiting(incident: Incident, why: str) -> None:
    """Automation stopped short of isolating: say why on the incident (the human decides)."""
    with transaction.atomic():
        updated = Incident.objects.filter(pk=incident.pk, waiting_for="").update(waiting_for=why[:300])
        if updated:
            add_event(incident, None, "waiting", why)
            record_event(None, "incident.wait", incident, reason=why, after={"waiting_for": why[:300]})
