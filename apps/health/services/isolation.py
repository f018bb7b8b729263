"""Automatic isolation: the pool's policy, the hourly safety budget, the storm alert, the inference guard.

Automation isolates only the obvious cases and only within the budget (at most N nodes and at most X %
of a pool per hour); beyond it incidents wait for a human and one storm alert fires per pool and hour.
It never takes an online-inference service below its minimum replicas without a human, and it never
touches a node a human isolated (see `NodeHealth.isolated_by`).
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.audit.services import record_event
from apps.fleet.models import Node, NodeState
from apps.health.models import (
    ISOLATING_ACTIONS,
    Incident,
    IncidentState,
    IsolationOwner,
    IsolationPolicy,
    NodeHealth,
    RuleAction,
    Severity,
    StormAlert,
)
from apps.health.rules import AUTOMATIC_REASON, AUTOMATION_STARTED
from apps.health.services.incidents import add_event, advance_incident, set_waiting, transition_incident

BUDGET_WINDOW = timedelta(hours=1)
DEFAULT_CORDON = [Severity.CRITICAL, Severity.FATAL]
logger = logging.getLogger(__name__)


def default_policy() -> IsolationPolicy:
    """The policy of pools without their own: cordon critical and fatal findings, drain nothing automatically."""
    policy = IsolationPolicy.objects.filter(pool__isnull=True).first()
    if policy is None:
        try:
            with transaction.atomic():
                policy = IsolationPolicy.objects.create(pool=None, cordon_severities=DEFAULT_CORDON)
                record_event(None, "health.policy.seed", policy, after={"cordon_severities": DEFAULT_CORDON})
        except IntegrityError:
            policy = IsolationPolicy.objects.get(pool__isnull=True)
    return policy


def policy_for(pool) -> IsolationPolicy:
    if pool is not None:
        own = IsolationPolicy.objects.filter(pool=pool).first()
        if own is not None:
            return own
    return default_policy()


def _group(node: Node):
    """The nodes a budget is counted over: the node's pool, or its cluster's nodes without a pool."""
    nodes = Node.objects.filter(cluster_id=node.cluster_id).exclude(state=NodeState.VANISHED)
    return nodes.filter(pool_id=node.pool_id) if node.pool_id else nodes.filter(pool__isnull=True)


def budget_limit(policy: IsolationPolicy, group_size: int) -> int:
    """At most `max_nodes_per_hour`, and at most `max_percent_per_hour` % of the group (never below one node)."""
    by_share = max(1, math.floor(group_size * policy.max_percent_per_hour / 100)) if group_size else 0
    return min(policy.max_nodes_per_hour, by_share)


def budget_used(node: Node, since) -> int:
    return (
        Incident.objects.filter(node__in=_group(node), auto_isolated_at__gte=since).values("node_id").distinct().count()
    )


def budget_report(node: Node) -> dict:
    policy = policy_for(node.pool)
    size = _group(node).count()
    return {
        "used": budget_used(node, timezone.now() - BUDGET_WINDOW),
        "limit": budget_limit(policy, size),
        "nodes": size,
    }


def inference_guard(node: Node, extra_isolated: set[str] = frozenset()) -> str:
    """Why isolating `node` needs a human: online-inference services that would fall below their minimum
    replicas, every one of them named ("" when none would).

    A replica that spans several nodes (a LeaderWorkerSet group) is lost with any one of its workers: evicting
    any pod of the group recreates the whole group
    (https://github.com/kubernetes-sigs/lws/blob/main/docs/examples/sample/README.md). Placements do not say
    which worker belongs to which replica, so each worker out of service counts as one replica lost.
    """
    from apps.workloads.models import WorkloadKind, WorkloadState
    from apps.workloads.placements import placed_on_node

    services = sorted(
        (
            w
            for w in placed_on_node(node.cluster_id, node.name)
            if w.kind == WorkloadKind.INFERENCE
            and w.tier.name == "online-inference"
            and w.state == WorkloadState.RUNNING
        ),
        key=lambda w: w.pk,
    )
    if not services:
        return ""
    out_of_service = set(
        Node.objects.filter(cluster_id=node.cluster_id, unschedulable=True).values_list("name", flat=True)
    )
    out_of_service |= {node.name, *extra_isolated}
    short = []
    for workload in services:
        per_replica, minimum = _replica_shape(workload, node.gpu_count)
        workers = workload.placements or []
        replicas = len(workers) // per_replica
        lost = sum(1 for p in workers if p.get("node") in out_of_service)
        left = max(replicas - lost, 0)
        if left < minimum:
            short.append(f"{workload} with {left} of its minimum {minimum} replicas")
    if not short:
        return ""
    return (
        f"isolating {node.name} would leave online-inference service{'s' if len(short) > 1 else ''} "
        f"{'; '.join(short)}; a human approves by cordoning it"
    )


def _replica_shape(workload, gpus_per_node: int) -> tuple[int, int]:
    """(nodes one replica spans, the replicas the service must keep) from its spec as the renderer reads it:
    a replica wider than a node spans whole nodes of this cluster's size."""
    from apps.workloads.specs import SpecError, parse_spec
    from apps.workloads.submission_context import catalog

    try:
        spec = parse_spec(workload.kind, workload.spec or {}, catalog(), gpus_per_node=gpus_per_node or 8)
    except SpecError:  # a spec the catalog no longer accepts: every worker is its own replica of at least one
        return 1, max(int((workload.spec or {}).get("replicas") or 1), 1)
    minimum = spec.autoscaling.min_replicas if spec.autoscaling.enabled else spec.replicas
    return spec.nodes_per_replica, max(minimum, 1)


def _storm(node: Node, policy: IsolationPolicy, now) -> None:
    """One storm alert per pool and hour, fired under the policy lock so two workers never both fire it."""
    from apps.health.services.notify import notify_storm

    if StormAlert.objects.filter(
        cluster_id=node.cluster_id, pool_id=node.pool_id, fired_at__gte=now - BUDGET_WINDOW
    ).exists():
        return
    waiting = Incident.objects.open().filter(node__in=_group(node), state=IncidentState.DETECTED).count()
    storm = StormAlert.objects.create(cluster_id=node.cluster_id, pool_id=node.pool_id, fired_at=now, waiting=waiting)
    where = f"pool {node.pool}" if node.pool_id else f"cluster {node.cluster.name}"
    text = (
        f"Isolation budget of {where} is used up ({policy.max_nodes_per_hour} nodes / "
        f"{policy.max_percent_per_hour:g} % per hour): {waiting} incidents wait for a human."
    )
    record_event(None, "health.storm", storm, reason=text, after={"waiting": waiting})
    notify_storm(storm, text)


def consider_isolation(incident_id: int) -> str:
    """Decide whether automation isolates the incident's node now; returns what it decided (for logs/tests)."""
    incident = Incident.objects.select_related("node__pool", "node__cluster").get(pk=incident_id)
    if incident.state != IncidentState.DETECTED or incident.waiting_for:
        return "not-pending"
    if incident.action not in ISOLATING_ACTIONS:
        return "not-isolating"
    node = incident.node
    policy = policy_for(node.pool)
    drain = incident.action == RuleAction.DRAIN and incident.severity in policy.drain_severities
    if not policy.enabled or not (drain or incident.severity in policy.cordon_severities):
        set_waiting(incident, f"the pool's policy does not isolate {incident.severity} incidents automatically")
        return "policy"
    health, _ = NodeHealth.objects.get_or_create(node=node)
    if node.unschedulable:
        owner = "automation" if health.isolated_by == IsolationOwner.AUTO else "a human (or outside the console)"
        advance_incident(
            None,
            incident,
            [IncidentState.ISOLATING, IncidentState.ISOLATED],
            f"the node is already cordoned by {owner}",
        )
        return "already-isolated"
    joining = Incident.objects.open().filter(node=node, auto_isolated_at__isnull=False).exclude(pk=incident.pk)
    if joining.exists():
        # Automation is already isolating this node for another cause: this incident rides along (no budget).
        Incident.objects.filter(pk=incident.pk).update(auto_isolated_at=timezone.now())
        transition_incident(None, incident, IncidentState.ISOLATING, "automatic: the node is being isolated already")
        return "joined"
    guard = inference_guard(node)
    if guard:
        set_waiting(incident, guard)
        return "needs-approval"
    now = timezone.now()
    with transaction.atomic():
        locked = IsolationPolicy.objects.select_for_update().get(pk=policy.pk)
        used = budget_used(node, now - BUDGET_WINDOW)
        limit = budget_limit(locked, _group(node).count())
        if used >= limit:
            set_waiting(
                incident, f"isolation budget used: {used} of {limit} nodes isolated automatically in the last hour"
            )
            _storm(node, locked, now)
            return "budget"
        Incident.objects.filter(pk=incident.pk).update(auto_isolated_at=now)
        NodeHealth.objects.filter(pk=node.pk).update(isolated_by=IsolationOwner.AUTO, isolated_at=now)
        kind = "health.drain" if drain else "health.cordon"
        reason = AUTOMATIC_REASON % {"title": incident.title, "incident": incident.pk}
        transition_incident(None, incident, IncidentState.ISOLATING, reason)
        from apps.operations.services import start_operation

        operation = start_operation(
            None,
            kind,
            target=node,
            params={"node_id": node.pk, "incident_id": incident.pk, "automatic": True},
            reason=reason,
        )
        add_event(incident, None, "action", AUTOMATION_STARTED % {"kind": kind, "operation": operation.pk})
        if kind == "health.cordon" and settings.HEALTH_CORDON_INLINE:
            # A cordon is one backend call: apply it here, now, rather than after the next free worker's queue.
            # The operation's message is sent as well; whichever delivery claims the operation first runs it.
            transaction.on_commit(partial(_run_inline, operation.pk))
    return "isolating"


def _run_inline(operation_id: int) -> None:
    from apps.operations.runner import execute_operation

    try:
        execute_operation(operation_id)
    except Exception:  # the queued delivery is still there to run it; the cycle carries on with other nodes
        logger.exception("inline cordon (operation %s) failed; left to the queued delivery", operation_id)
