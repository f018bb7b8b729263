"""Operation handlers behind the runbook actions: each calls the node's backend (outside any transaction),
records what it did in the operation's log, keeps the console's node row in step, and moves the node's open
incidents along (isolating → isolated, draining → drained, → repairing, validating → resolved)."""

from __future__ import annotations

import inspect

from django.utils import timezone
from django.utils.translation import gettext_noop

from apps.backends.base import BackendError, RetryableBackendError
from apps.backends.registry import get_backend
from apps.backends.types import BackendState, Taint
from apps.fleet.inventory import RESET_TAINT, RMA_TAINT
from apps.fleet.models import Node
from apps.health.models import Incident, IncidentState, IsolationOwner, LostRun, NodeHealth
from apps.health.rules import INCIDENT_REASON, OPERATION_DONE
from apps.health.services.incidents import FAULT_LOOKBACK, add_event, advance_incident
from apps.operations.runner import OperationFailed, OperationHandler, register

# Shown as "3 of 8 workloads evicted" on the operation's page (translated there).
WORKLOADS_EVICTED = gettext_noop("workloads evicted")
_DEAD = {BackendState.FAILED, BackendState.UNKNOWN, BackendState.PREEMPTED, BackendState.CANCELLED}


class NodeAction(OperationHandler):
    """Shared steps: load the node and its open incidents, call the backend, move incidents, report."""

    action = "operate"
    before_states: list[str] = []
    after_states: list[str] = []

    def run(self) -> dict:
        params = self.operation.params
        self.node = Node.objects.select_related("cluster").get(pk=params["node_id"])
        self.actor = self.operation.actor
        self.reason = self.operation.reason or self.kind
        self.backend = get_backend(self.node.cluster)
        # Every open incident of the node moves with it: a cordon isolates the node for all of its causes.
        self.incidents = list(Incident.objects.open().filter(node=self.node).order_by("id"))
        self._advance(self.before_states)
        self.set_progress(10)
        try:
            result = self.act()
        except BackendError as exc:
            self._rollback()
            raise OperationFailed(f"{self.node.cluster.name} refused: {exc}") from exc
        self.set_progress(80)
        self._advance(self.after_states)
        for incident in self.incidents:
            add_event(
                incident, self.actor, "action", OPERATION_DONE % {"kind": self.kind, "operation": self.operation.pk}
            )
        # The incidents it moved along: the operation's page links to them.
        return {"node": self.node.name, "incidents": [i.pk for i in self.incidents], **result}

    def act(self) -> dict:
        raise NotImplementedError

    @property
    def by(self) -> str:
        """Who asked, as the cluster records it: the user who started the operation, or the console itself for
        automation. Kubernetes writes it as the value of the `gpu-console/cordoned-by` annotation (an annotation
        value may be any string, https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/)."""
        return self.actor.get_username() if self.actor is not None else "gpu-console"

    def call_backend(self, method, *args, **optional):
        """Call a backend node operation, passing each of `optional` only to backends whose method takes it (the
        interface's own arguments go in `args`): Kubernetes records who cordoned and reports each eviction."""
        accepted = inspect.signature(method).parameters
        return method(*args, **{key: value for key, value in optional.items() if key in accepted})

    def _advance(self, states: list[str]) -> None:
        if states:
            self.incidents = [advance_incident(self.actor, i, states, self.reason) for i in self.incidents]

    def _rollback(self) -> None:
        """The backend refused: an incident left `isolating` goes back to `detected` for the next attempt, and a
        node that was never cordoned is nobody's isolation."""
        NodeHealth.objects.filter(pk=self.node.pk, node__unschedulable=False).update(
            isolated_by=IsolationOwner.NONE, isolated_at=None
        )
        for incident in self.incidents:
            if incident.state == IncidentState.ISOLATING:
                advance_incident(self.actor, incident, [IncidentState.DETECTED], f"{self.kind} failed")

    def _set_node(self, **fields) -> None:
        Node.objects.filter(pk=self.node.pk).update(**fields)

    def requeue_killed_work(self) -> list[str]:
        """Training jobs that died on the faulty GPUs (the backend says so) go back to their queue."""
        from apps.workloads.placements import placed_on_node
        from apps.workloads.services.requeue import FAULT, requeue_workload

        gpus = {g["index"] for i in self.incidents for g in i.gpus}
        if not self.incidents:
            return []
        since = min(i.detected_at for i in self.incidents) - FAULT_LOOKBACK
        hit = [
            w
            for w in placed_on_node(self.node.cluster_id, self.node.name, gpus=gpus or None, ended_since=since)
            if w.kind == "training" and w.backend_name
        ]
        if not hit:
            return []
        statuses = self.backend.status([w.backend_name for w in hit])
        requeued = []
        for workload in hit:
            status = statuses.get(workload.backend_name)
            if status is not None and status.state in _DEAD:
                self.record_lost_runs([workload.backend_name], at=status.finished_at)
                why = INCIDENT_REASON % {"title": self.incidents[0].title, "incident": self.incidents[0].pk}
                if requeue_workload(self.actor, workload, cause=FAULT, reason=why) is not None:
                    requeued.append(str(workload))
                    for incident in self.incidents:
                        add_event(incident, self.actor, "requeue", f"requeued {workload}: it died on the fault")
        if requeued:
            self.log(f"requeued {len(requeued)} training job(s) killed by the fault: {', '.join(requeued)}")
        return requeued

    def tell_owners(self, backend_ids: list[str]) -> None:
        """The owners of the work a drain evicted hear of it (their tenant's channels and the submitters' e-mail),
        whoever drained: an incident's own messages name only the work on its faulty GPUs."""
        from apps.health.services.notify import notify_evicted
        from apps.workloads.models import Workload

        evicted = list(
            Workload.objects.filter(cluster_id=self.node.cluster_id, backend_name__in=backend_ids)
            .select_related("tenant", "created_by")
            .order_by("id")
        )
        if evicted:
            sent = notify_evicted(self.node, self.operation, evicted, by=self.by)
            self.log(f"told the owners of {len(evicted)} evicted workload(s): {sent} message(s) queued")

    def record_lost_runs(self, backend_ids: list[str], at=None) -> None:
        """Record the runs the fault cost (each since its start or last checkpoint), linked to the node's incident,
        for chargeback to credit their owners (it pulls them when it settles credits). Only faults: a drain
        with no open incident records nothing. `at` is in the backend's clock (its now when not given)."""
        if not backend_ids or not self.incidents:
            return
        incident = self.incidents[0]
        at = at or self.backend.now()
        reason = INCIDENT_REASON % {"title": incident.title, "incident": incident.pk}
        actor = self.actor if getattr(self.actor, "pk", None) else None
        LostRun.objects.bulk_create(
            [
                LostRun(
                    incident=incident,
                    cluster=self.node.cluster,
                    backend_id=backend_id,
                    interrupted_at=at,
                    reason=reason[:500],
                    actor=actor,
                )
                for backend_id in backend_ids
            ],
            ignore_conflicts=True,  # the same run at the same instant is one loss
        )
        self.log(f"recorded {len(backend_ids)} interrupted run(s) for their tenants' credit (chargeback)")


@register("health.cordon")
class CordonNode(NodeAction):
    """Cordon: no new work is placed on the node; what runs there keeps running."""

    before_states = [IncidentState.ISOLATING]
    after_states = [IncidentState.ISOLATED]

    def act(self) -> dict:
        self.call_backend(self.backend.cordon, self.node.name, f"gpu-console: {self.reason}", by=self.by)
        self._set_node(unschedulable=True)
        self.log(f"cordoned {self.node.name}")
        return {"cordoned": True, "requeued": self.requeue_killed_work()}


@register("health.drain")
class DrainNode(NodeAction):
    """Drain: cordon, then evict what runs on the node (the backend requeues it elsewhere)."""

    before_states = [IncidentState.ISOLATING, IncidentState.ISOLATED, IncidentState.DRAINING]
    after_states = [IncidentState.DRAINED]

    def act(self) -> dict:
        from apps.workloads.placements import placed_on_node

        total = len(placed_on_node(self.node.cluster_id, self.node.name))
        self.set_steps(0, total, WORKLOADS_EVICTED)

        # Backends that evict pod by pod (Kubernetes) report each eviction: the page shows it as it happens.
        def progress(message: str, percent: float) -> None:
            self.log(message)
            self.set_progress(10 + 0.7 * percent)

        result = self.call_backend(
            self.backend.drain, self.node.name, f"gpu-console: {self.reason}", by=self.by, progress=progress
        )
        self.set_steps(len(result.evicted), max(total, len(result.evicted)), WORKLOADS_EVICTED)
        self.record_lost_runs(list(result.evicted))
        self.tell_owners(list(result.evicted))
        self._set_node(unschedulable=True)
        for line in result.skipped:
            self.log(f"left in place: {line}")
        if result.blocked:
            # Kubernetes: a PodDisruptionBudget still refused these at the drain's timeout. The node stays
            # cordoned and the incident goes back to isolated; draining again retries them.
            for pod, why in result.blocked.items():
                self.log(f"not evicted: {pod}: {why}")
            raise RetryableBackendError(
                f"{len(result.blocked)} pod(s) on {self.node.name} could not be evicted: "
                + "; ".join(f"{pod}: {why}" for pod, why in result.blocked.items())
            )
        self.log(f"drained {self.node.name}: evicted {len(result.evicted)}: {', '.join(result.evicted) or 'nothing'}")
        return {"evicted": result.evicted, "requeued": self.requeue_killed_work()}

    def _rollback(self) -> None:
        for incident in self.incidents:
            if incident.state == IncidentState.DRAINING:
                advance_incident(self.actor, incident, [IncidentState.ISOLATED], "drain failed")
        super()._rollback()


@register("health.uncordon")
class UncordonNode(NodeAction):
    """Uncordon: new work may be placed on the node again."""

    def act(self) -> dict:
        self.backend.uncordon(self.node.name)
        self._set_node(unschedulable=False)
        NodeHealth.objects.filter(pk=self.node.pk).update(isolated_by=IsolationOwner.NONE, isolated_at=None)
        self.log(f"uncordoned {self.node.name}")
        return {"cordoned": False}


@register("health.resume")
class ResumeNode(NodeAction):
    """Resume after repair: clear the reset/RMA marks, return the node to service, resolve validated incidents."""

    after_states = [IncidentState.RESOLVED]

    def act(self) -> dict:
        for key in (RESET_TAINT, RMA_TAINT):
            self.backend.untaint(self.node.name, key)
        self.backend.resume(self.node.name)
        self._set_node(unschedulable=False)
        NodeHealth.objects.filter(pk=self.node.pk).update(isolated_by=IsolationOwner.NONE, isolated_at=None)
        self.log(f"resumed {self.node.name}")
        return {"resumed": True}


class _Mark(NodeAction):
    before_states = [IncidentState.ISOLATING, IncidentState.ISOLATED]
    after_states = [IncidentState.REPAIRING]
    taint = ""
    what = ""

    def act(self) -> dict:
        self.call_backend(self.backend.cordon, self.node.name, f"gpu-console: {self.what}: {self.reason}", by=self.by)
        self.backend.taint(self.node.name, Taint(self.taint, timezone.now().strftime("%Y%m%dT%H%M"), "NoSchedule"))
        self._set_node(unschedulable=True)
        self.log(f"cordoned {self.node.name} and tainted it {self.taint}:NoSchedule ({self.what})")
        return {"taint": self.taint}


@register("health.request-reset")
class RequestReset(_Mark):
    """Ask for a GPU reset / node reboot: the node is cordoned and tainted until someone resets it."""

    taint = RESET_TAINT
    what = "GPU reset requested"


@register("health.mark-rma")
class MarkRma(_Mark):
    """Mark the node's GPU(s) for return to the vendor: cordoned and tainted until replaced."""

    taint = RMA_TAINT
    what = "RMA requested"
