"""Runbook actions for on-call: cordon, uncordon, drain, resume, request a GPU reset, mark for RMA.

Each needs a reason, can be previewed (`impact`: what would be evicted, which tenants drop below their
guarantee, the capacity left per GPU model) and runs as a persisted operation through the backend
interface. One node has at most one runbook operation at a time: a second engineer gets a 409 that
carries the running operation instead of starting a conflicting one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.core.errors import Conflict, InvalidInput
from apps.core.value_labels import value_label
from apps.fleet.capacity import capacity_by_model
from apps.fleet.models import Node
from apps.health.models import Incident, IncidentState, IsolationOwner, NodeHealth
from apps.operations.models import Operation, OperationStatus

# action name → (operation kind, takes the node out of service, evicts its work)
ACTIONS: dict[str, tuple[str, bool, bool]] = {
    "cordon": ("health.cordon", True, False),
    "uncordon": ("health.uncordon", False, False),
    "drain": ("health.drain", True, True),
    "resume": ("health.resume", False, False),
    "request-reset": ("health.request-reset", True, False),
    "mark-rma": ("health.mark-rma", True, False),
}


@dataclass
class Impact:
    """What an action on a node would do, before it is done."""

    action: str
    node: str
    cluster: str
    evicted: list[dict] = field(default_factory=list)
    tenants_below_guarantee: list[dict] = field(default_factory=list)
    capacity_left: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def impact(actor, node: Node, action: str) -> Impact:
    """The preview for `action` on `node` (reads only). It names every tenant's workloads and guarantees on the
    node, so it needs what the action needs: `operate` (actor None: the command line, as the system)."""
    from apps.health.services.isolation import inference_guard
    from apps.tenancy.models import Quota
    from apps.workloads.models import Workload, WorkloadState
    from apps.workloads.placements import placed_on_node

    if actor is not None:
        require(actor, Action.OPERATE, None, _("Runbook previews need the on-call or platform-admin role."))
    _kind, removes, evicts = _action(action)
    result = Impact(action=action, node=node.name, cluster=node.cluster.name)
    evicted = placed_on_node(node.cluster_id, node.name) if evicts else []
    result.evicted = [
        {
            "id": w.pk,
            "name": w.name,
            "tenant": w.tenant.slug,
            "kind": w.kind,
            "tier": w.tier.name,
            "gpus": w.gpus,
            "state": w.state,
        }
        for w in evicted
    ]
    # Tenants whose queue would fall below its guarantee of this GPU model once the evicted work stops.
    lost: dict[tuple[int, int], float] = defaultdict(float)
    for w in evicted:
        lost[(w.queue_id, w.gpu_model_id)] += w.gpus
    if lost:
        running = {
            (row["queue_id"], row["gpu_model_id"]): row["total"] or 0
            for row in Workload.objects.filter(
                queue_id__in={q for q, _gpus in lost}, state__in=[WorkloadState.RUNNING, WorkloadState.ADMITTED]
            )
            .values("queue_id", "gpu_model_id")
            .annotate(total=Sum("gpus"))
        }
        for quota in Quota.objects.filter(queue_id__in={q for q, _gpus in lost}).select_related(
            "queue__tenant", "gpu_model"
        ):
            key = (quota.queue_id, quota.gpu_model_id)
            if key not in lost:
                continue
            now = running.get(key, 0.0)
            after = max(now - lost[key], 0.0)
            if after < quota.guaranteed:
                result.tenants_below_guarantee.append(
                    {
                        "tenant": quota.queue.tenant.slug,
                        "queue": quota.queue.name,
                        "gpu_model": quota.gpu_model.code,
                        "guaranteed": quota.guaranteed,
                        "running_now": now,
                        "running_after": after,
                    }
                )
    # Capacity per model with the node out of service (or back in service for uncordon/resume).
    nodes = Node.objects.filter(cluster_id=node.cluster_id)
    before = {c.gpu_model: c for c in capacity_by_model(nodes)}
    others = capacity_by_model(nodes.exclude(pk=node.pk))
    after = {c.gpu_model: c for c in others}
    node_free = 0 if removes else max(node.gpu_allocatable - node.gpu_allocated, 0)
    for model in sorted(set(before) | set(after)):
        b, a = before.get(model), after.get(model)
        free_after = (a.free if a else 0) + (node_free if model == getattr(node.gpu_model, "name", None) else 0)
        result.capacity_left.append(
            {
                "gpu_model": model,
                "free_now": b.free if b else 0,
                "free_after": free_after,
                "evicted_gpus_to_replace": sum(w.gpus for w in evicted if w.gpu_model.name == model),
            }
        )
    if removes:
        guard = inference_guard(node)
        if guard:
            result.warnings.append(guard)
    if action == "resume":
        blocking = _blocking_incidents(node)
        if blocking:
            result.warnings.append(
                "open incidents must reach validating first: " + ", ".join(f"#{i.pk} ({i.state})" for i in blocking)
            )
    return result


def _action(action: str) -> tuple[str, bool, bool]:
    try:
        return ACTIONS[action]
    except KeyError:
        raise InvalidInput(
            _("Unknown action %(action)s.") % {"action": repr(action)},
            {"action": _("One of: %(values)s.") % {"values": ", ".join(ACTIONS)}},
        ) from None


def _blocking_incidents(node: Node) -> list[Incident]:
    return list(Incident.objects.open().filter(node=node).exclude(state=IncidentState.VALIDATING).order_by("id"))


def running_operation(node: Node) -> Operation | None:
    return (
        Operation.objects.filter(
            kind__startswith="health.",
            target_type="fleet.node",
            target_id=str(node.pk),
            status__in=[OperationStatus.PENDING, OperationStatus.RUNNING],
        )
        .order_by("id")
        .first()
    )


def _operation_data(operation: Operation) -> dict:
    return {
        "id": operation.pk,
        "kind": operation.kind,
        "status": operation.status,
        "progress": operation.progress,
        "actor": operation.actor.get_username() if operation.actor_id else "system",
        "reason": operation.reason,
        "created_at": operation.created_at.isoformat(),
    }


def node_action(actor, node: Node, action: str, *, reason: str, incident: Incident | None = None) -> Operation:
    """Start a runbook action on `node` as a persisted operation (actor None: the command line, as the system)."""
    from apps.operations.services import start_operation

    kind, removes, _evicts = _action(action)
    if actor is not None:
        require(actor, Action.OPERATE, None, _("Runbook actions need the on-call or platform-admin role."))
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput(_("Say why (a reason is required)."), {"reason": _("Required.")})
    if action == "resume":
        blocking = _blocking_incidents(node)
        if blocking:
            listed = ", ".join(f"#{i.pk} {i.title} ({i.state})" for i in blocking)
            raise Conflict(
                _(
                    "Node %(node)s has open incidents that have not been validated: %(incidents)s. Move them to "
                    "validating (or mark them false positive) first."
                )
                % {"node": node.name, "incidents": listed},
                {"node": _("Open incidents first.")},
            )
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(pk=node.pk)  # one decision per node at a time
        running = running_operation(node)
        if running is not None:
            raise Conflict(
                _(
                    "Operation #%(id)s (%(kind)s) on %(node)s is %(status)s; wait for it or follow it instead of "
                    "starting another."
                )
                % {
                    "id": running.pk,
                    "kind": running.kind,
                    "node": node.name,
                    "status": value_label(running.status, "operation status"),
                },
                {"node": _("An operation is running.")},
                code="operation_running",
                data={"operation": _operation_data(running)},
            )
        if action == "cordon" and locked.unschedulable:
            _check_repeated_cordon(locked)
        params = {"node_id": node.pk, "incident_id": incident.pk if incident else None, "automatic": False}
        operation = start_operation(actor, kind, target=node, params=params, reason=reason)
        # A human took the node out of service (or back): automation must not undo it.
        owner = IsolationOwner.HUMAN if removes else IsolationOwner.NONE
        NodeHealth.objects.get_or_create(node=node)
        NodeHealth.objects.filter(pk=node.pk).update(isolated_by=owner, isolated_at=timezone.now() if removes else None)
    return operation


def _check_repeated_cordon(node: Node) -> None:
    """A cordon of a node that is already cordoned changes nothing: say so and by whom, start nothing. The one
    exception is a node automation cordoned: a human's cordon takes it over, so automation will not resume it."""
    health = NodeHealth.objects.filter(pk=node.pk).first()
    owner = health.isolated_by if health else IsolationOwner.NONE
    if owner == IsolationOwner.AUTO:
        return
    last = (
        Operation.objects.filter(
            kind__in=[kind for kind, removes, _evicts in ACTIONS.values() if removes],
            target_type="fleet.node",
            target_id=str(node.pk),
            status=OperationStatus.SUCCEEDED,
        )
        .select_related("actor")
        .order_by("-finished_at", "-id")
        .first()
    )
    who, data = _("outside the console"), {}
    if owner == IsolationOwner.HUMAN and last is not None:
        who = _("by %(actor)s (operation #%(id)s: %(reason)s)") % {
            "actor": last.actor.get_username() if last.actor_id else "system",
            "id": last.pk,
            "reason": last.reason,
        }
        data = {"cordoned_by": _operation_data(last)}
    elif owner == IsolationOwner.HUMAN:  # its operation was pruned since
        who = _("by a person, through the console")
    raise Conflict(
        _("Node %(node)s is already cordoned %(who)s; cordoning it again changes nothing.")
        % {"node": node.name, "who": who},
        {"action": _("Already cordoned: uncordon it, or drain it to evict its work.")},
        code="already_cordoned",
        data=data,
    )
