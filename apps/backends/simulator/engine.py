"""The simulation of one cluster: load its state, let simulated time pass, apply an operation, save.

Every backend call runs as one `Engine.open(cluster)` block: one transaction that locks the
cluster's SimCluster row (so web, worker and beat never interleave on one simulation), loads the
whole mutable state in a constant number of queries, ticks, applies the call and writes back with
bulk operations.

Time: simulated time is real time plus the cluster's clock offset. `tick()` is a small discrete-event
loop: it finishes running workloads in the order their runs end, and after each end places pending
work at that instant. So the history does not depend on how often anyone calls: ticking once after
advancing a day gives the same placements and outcomes as ticking every second.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from apps.backends.base import NotFoundError, PermanentBackendError
from apps.backends.simulator.coldstart import ColdStart, cold_start, pull_s
from apps.backends.simulator.faults import EFFECTS, GPU_KINDS, FaultKind, parse_kind
from apps.backends.simulator.hardware import MODELS, pool_of
from apps.backends.simulator.models import (
    ACTIVE_STATES,
    SimAllocation,
    SimCluster,
    SimEvent,
    SimFault,
    SimNode,
    SimWorkload,
)
from apps.backends.simulator.placement import (
    GpuSlot,
    NodeState,
    Request,
    WorkerPlacement,
    occupy,
    place,
    release,
    tolerations_from_labels,
)
from apps.backends.simulator.shape import generate
from apps.backends.simulator.specs import run_plan, served_model, share_label, spec_from_json, spec_to_json, to_request
from apps.backends.types import KIND_LABEL, WARM_LABEL, BackendState, DrainResult, SubmitResult, Taint, WorkloadSpec

_WORKLOAD_FIELDS = ["state", "reason", "started_at", "ends_at", "finished_at", "attempts"]


def replica_start(sim: SimCluster, workload: SimWorkload, gpu_model: str | None, scheduled: datetime) -> ColdStart:
    """The cold start of `workload`'s replica scheduled at `scheduled` on a node of `gpu_model` (coldstart.py): its
    image pre-pulled if the model's pool pulls it, its weights warm if the service has a warm Job."""
    spec = workload.spec
    image = spec.get("image", "")
    pulled = (sim.prepulled or {}).get(pool_of(gpu_model)[0], {}).get(image) if gpu_model else None
    return cold_start(
        image=image,
        model=served_model(spec.get("command", [])),
        scheduled=scheduled,
        prepulled_at=datetime.fromisoformat(pulled) if pulled else None,
        warm_since=workload.submitted_at if spec.get("labels", {}).get(WARM_LABEL) else None,
    )


class Engine:
    """The mutable state of one simulated cluster during one call. Use `Engine.open(cluster)`."""

    def __init__(self, sim: SimCluster):
        self.sim = sim
        self.shape = sim.fleet_shape()
        self.fleet = generate(self.shape)
        self.now: datetime = sim.sim_now()
        self.ops: dict[str, SimNode] = {n.name: n for n in SimNode.objects.filter(sim=sim)}
        self.faults: list[SimFault] = list(SimFault.objects.filter(sim=sim).order_by("id"))
        # Running work's spec is only needed again if it is evicted: leave it unparsed (loaded on access).
        pending = SimWorkload.objects.filter(sim=sim, state=BackendState.PENDING)
        running = SimWorkload.objects.filter(sim=sim, state=BackendState.RUNNING).defer("spec")
        self.workloads: dict[str, SimWorkload] = {w.name: w for w in [*pending, *running]}
        self.allocations: dict[int, list[SimAllocation]] = {}
        self.nodes: dict[str, NodeState] = {}
        self._requests: dict[int, Request] = {}
        self._running: list[tuple[datetime, int, str]] = []  # heap of (ends_at, id, name)
        self._new_allocations: list[SimAllocation] = []
        self._new_events: list[SimEvent] = []
        self._dirty_allocations: dict[int, SimAllocation] = {}
        self._dirty_workloads: dict[int, SimWorkload] = {}
        self._dirty_ops: set[str] = set()
        self._dirty_faults: list[SimFault] = []
        self._build_nodes()
        by_id = {w.pk: w for w in self.workloads.values()}
        for allocation in SimAllocation.objects.filter(sim=sim, ended_at__isnull=True).order_by("id"):
            workload = by_id.get(allocation.workload_id)
            if workload is None:  # defensive: an open row of a finished workload would hold its GPUs forever
                allocation.ended_at = self.now
                self._dirty_allocations[allocation.pk] = allocation
                continue
            allocation.workload = workload
            self.allocations.setdefault(workload.pk, []).append(allocation)
            node = self.nodes[allocation.node]
            for index in allocation.gpu_indexes:
                occupy(node.slots[index], allocation.mode, allocation.share, allocation)
        for workload in self.workloads.values():
            if workload.state == BackendState.RUNNING and workload.ends_at is not None:
                heapq.heappush(self._running, (workload.ends_at, workload.pk, workload.name))

    # Opening and saving

    @classmethod
    @contextmanager
    def open(cls, cluster) -> Iterator[Engine]:
        """Lock, load and tick the simulation of `cluster` (a fleet Cluster or its id); save on success."""
        cluster_id = getattr(cluster, "pk", cluster)
        with transaction.atomic():
            sim = (
                SimCluster.objects.select_for_update(of=("self",))
                .select_related("cluster")
                .filter(cluster_id=cluster_id)
                .first()
            )
            if sim is None:
                name = getattr(cluster, "name", cluster_id)
                raise PermanentBackendError(
                    f"cluster {name!r} has no simulation; create it with `manage.py simulate create`"
                )
            engine = cls(sim)
            engine.tick()
            yield engine
            engine.save()

    def save(self) -> None:
        """Write what changed, in bulk. Safe to call more than once (a flush before a read query)."""
        if self._new_allocations:
            SimAllocation.objects.bulk_create(self._new_allocations)
            self._new_allocations = []
        if self._dirty_allocations:
            SimAllocation.objects.bulk_update(list(self._dirty_allocations.values()), ["ended_at"], batch_size=500)
            self._dirty_allocations = {}
        if self._dirty_workloads:
            SimWorkload.objects.bulk_update(list(self._dirty_workloads.values()), _WORKLOAD_FIELDS, batch_size=500)
            self._dirty_workloads = {}
        if self._new_events:
            SimEvent.objects.bulk_create(self._new_events)
            self._new_events = []
        for name in sorted(self._dirty_ops):
            ops = self.ops[name]
            if ops.is_default:
                if ops.pk:
                    ops.delete()
                del self.ops[name]
            else:
                ops.save()
        self._dirty_ops = set()
        for fault in self._dirty_faults:
            fault.save()
        self._dirty_faults = []
        next_event = self._next_event()
        if next_event != self.sim.next_event_at:
            self.sim.next_event_at = next_event
            self.sim.save(update_fields=["next_event_at"])

    def _next_event(self) -> datetime | None:
        while self._running:
            ends_at, _pk, name = self._running[0]
            workload = self.workloads.get(name)
            if workload is not None and workload.state == BackendState.RUNNING and workload.ends_at == ends_at:
                return ends_at
            heapq.heappop(self._running)  # stale: cancelled, evicted or failed before its end
        return None

    def _build_nodes(self) -> None:
        active_faults = self.faults_by_node()
        for spec in self.fleet:
            node = NodeState(
                spec=spec,
                mig_profiles=MODELS[spec.model].mig_slices,
                slots=[GpuSlot(gpu.index) for gpu in spec.gpus],
            )
            ops = self.ops.get(spec.name)
            if ops is not None:
                node.cordoned = ops.cordoned
                node.taints = [Taint(**t) for t in ops.taints]
            self.nodes[spec.name] = node
            if spec.name in active_faults:
                self._apply_faults(node, active_faults[spec.name])

    def _apply_faults(self, node: NodeState, faults: list[SimFault]) -> None:
        node.down = any(f.kind == FaultKind.NODE_DOWN for f in faults)
        for slot in node.slots:
            slot.healthy = not any(
                f.hits(slot.index) and EFFECTS[FaultKind(f.kind)].gpu_health == "unhealthy" for f in faults
            )

    # Time

    def tick(self) -> None:
        """Finish the runs that ended by now, in order; after each end, place pending work at that instant."""
        while self._running and self._running[0][0] <= self.now:
            at = self._running[0][0]
            while self._running and self._running[0][0] == at:
                _, _pk, name = heapq.heappop(self._running)
                workload = self.workloads.get(name)
                if workload is not None and workload.state == BackendState.RUNNING and workload.ends_at == at:
                    self._finish(workload, at)
            self._place_pending(at)

    def advance(self, seconds: float) -> None:
        """Move simulated time forward (never back: counters and histories must stay monotonic)."""
        if seconds <= 0:
            raise PermanentBackendError("time only moves forward: give a positive number of seconds")
        self.sim.clock_offset_s += seconds
        self.sim.save(update_fields=["clock_offset_s"])
        self.now = self.sim.sim_now()
        self.tick()

    # Workloads

    def workload(self, name: str) -> SimWorkload | None:
        """The workload called `name`, active (in memory) or finished (from the database)."""
        if name in self.workloads:
            return self.workloads[name]
        workload = SimWorkload.objects.filter(sim=self.sim, name=name).first()
        if workload is not None:
            self.workloads[name] = workload
        return workload

    def submit(self, spec: WorkloadSpec) -> SubmitResult:
        """Accept `spec` (idempotent by name) and start it if it fits now."""
        existing = self.workload(spec.name)
        if existing is not None:
            return SubmitResult(existing.name, BackendState(existing.state), existing.reason)
        request = to_request(spec, self.shape)
        plan = run_plan(self.shape.seed, spec)
        workload = SimWorkload.objects.create(
            sim=self.sim,
            name=spec.name,
            tenant=spec.tenant,
            queue=spec.queue,
            gpu_model=spec.gpu_model,
            priority=spec.priority,
            spec=spec_to_json(spec),
            state=BackendState.PENDING,
            reason="waiting for placement",
            submitted_at=self.now,
            duration_s=plan.duration_s,
            fail_after_s=plan.fail_after_s,
            max_runtime_s=plan.max_runtime_s,
            hang_after_s=plan.hang_after_s,
            idle_phase_s=plan.idle_phase_s,
        )
        self.workloads[workload.name] = workload
        self._requests[workload.pk] = request
        self._log(workload, f"submitted: {spec.workers} × {share_label(request.demand)}", self.now)
        # Capacity has not grown since the last pass, so only the newcomer can have become placeable.
        self._try_place(workload, self.now, {})
        return SubmitResult(workload.name, BackendState(workload.state), workload.reason)

    def cancel(self, name: str) -> SimWorkload:
        workload = self.workload(name)
        if workload is None:
            raise NotFoundError(f"no workload {name!r} in simulated cluster {self.sim.cluster.name!r}")
        if workload.state in ACTIVE_STATES:
            was_running = workload.state == BackendState.RUNNING
            self._end(workload, BackendState.CANCELLED, "cancelled", self.now)
            if was_running:
                self._place_pending(self.now)
        return workload

    def allocations_of(self, workload: SimWorkload) -> list[SimAllocation]:
        return self.allocations.get(workload.pk, [])

    def _request(self, workload: SimWorkload) -> Request:
        request = self._requests.get(workload.pk)
        if request is None:
            request = to_request(spec_from_json(workload.spec), self.shape)
            self._requests[workload.pk] = request
        return request

    def _place_pending(self, at: datetime) -> None:
        pending = [w for w in self.workloads.values() if w.state == BackendState.PENDING]
        if not pending:
            return
        pending.sort(key=lambda w: (-w.priority, w.pk))
        blocked: dict[tuple, str] = {}
        for workload in pending:
            self._try_place(workload, at, blocked)

    def _try_place(self, workload: SimWorkload, at: datetime, blocked: dict[tuple, str]) -> None:
        """Start `workload` if it fits; else record why. `blocked` remembers failures within one pass:
        placements only take capacity away, so a request shape that failed stays failed for the pass."""
        request = self._request(workload)
        reason = blocked.get(request.signature)
        result = place(request, self.nodes.values()) if reason is None else reason
        if isinstance(result, str):
            blocked[request.signature] = result
            if workload.reason != result:
                workload.reason = result
                self._touch(workload)
            return
        self._start(workload, request, result, at)

    def _start(self, workload: SimWorkload, request: Request, placements: list[WorkerPlacement], at: datetime):
        demand = request.demand
        allocations = []
        ready = self._replicas_ready(workload, request, placements, at)
        for placement in placements:
            node = self.nodes[placement.node]
            allocation = SimAllocation(
                sim=self.sim,
                workload=workload,
                worker=placement.worker,
                node=placement.node,
                gpu_model=node.spec.model,
                gpu_indexes=placement.gpus,
                mode=demand.mode,
                share=demand.share,
                mig_profile=demand.profile,
                started_at=at,
                ready_at=ready.get(placement.worker),
            )
            for index in placement.gpus:
                node.slots[index].holders.append(allocation)
            allocations.append(allocation)
        self._new_allocations.extend(allocations)
        self.allocations[workload.pk] = allocations
        workload.state = BackendState.RUNNING
        workload.started_at = at
        workload.ends_at = at + timedelta(seconds=workload.run_s)
        workload.finished_at = None
        workload.attempts += 1
        workload.reason = ""
        where = ", ".join(sorted({a.node for a in allocations}))
        count = f"{len(placements)} of {request.workers}" if len(placements) < request.workers else len(placements)
        self._log(workload, f"started: {count} worker{'s' if request.workers > 1 else ''} on {where}", at)
        heapq.heappush(self._running, (workload.ends_at, workload.pk, workload.name))

    def _replicas_ready(
        self, workload: SimWorkload, request: Request, placements: list[WorkerPlacement], at: datetime
    ) -> dict[int, datetime]:
        """An inference service's replicas' ready times, on the first worker of each (a replica of several nodes
        serves once its last node does); {} for anything else."""
        if workload.spec.get("labels", {}).get(KIND_LABEL) != "inference":
            return {}
        gang = max(request.required, 1)
        out: dict[int, datetime] = {}
        for placement in placements:
            first = placement.worker - placement.worker % gang
            ready = self.ready_at(workload, self.nodes[placement.node].spec.model, at)
            out[first] = max(out.get(first, ready), ready)
        return out

    def ready_at(self, workload: SimWorkload, gpu_model: str, scheduled: datetime) -> datetime:
        """When an inference replica scheduled at `scheduled` on a node of `gpu_model` serves: its image pulled
        (unless its pool pre-pulls it), its weights downloaded or taken from the warm cache, its engine started."""
        return scheduled + timedelta(seconds=replica_start(self.sim, workload, gpu_model, scheduled).total_s)

    def _finish(self, workload: SimWorkload, at: datetime) -> None:
        if workload.times_out:
            # Its work would have gone on: the limit stops it, as activeDeadlineSeconds or sbatch --time would.
            reason = f"stopped at its max runtime of {workload.max_runtime_s}s"
            self._end(workload, BackendState.TIMED_OUT, reason, at)
        elif workload.fail_after_s is not None:
            reason = f"exited with code 1 after {workload.fail_after_s}s"
            self._end(workload, BackendState.FAILED, reason, at)
        else:
            self._end(workload, BackendState.SUCCEEDED, "completed", at)

    def _end(self, workload: SimWorkload, state: BackendState, reason: str, at: datetime) -> None:
        self._release(workload, at)
        workload.state = state
        workload.reason = reason
        workload.finished_at = at
        self._log(workload, f"{state}: {reason}", at)

    def _requeue(self, workload: SimWorkload, reason: str) -> None:
        """Evict a running workload back to pending (a drain, a NoExecute taint); it restarts from scratch."""
        self._release(workload, self.now)
        workload.state = BackendState.PENDING
        workload.started_at = workload.ends_at = None
        workload.reason = reason
        self._log(workload, reason, self.now)

    def _release(self, workload: SimWorkload, at: datetime) -> None:
        for allocation in self.allocations.pop(workload.pk, []):
            allocation.ended_at = at
            if allocation.pk:
                self._dirty_allocations[allocation.pk] = allocation
            node = self.nodes[allocation.node]
            for index in allocation.gpu_indexes:
                release(node.slots[index], allocation.mode, allocation.share, allocation)

    def _running_on(self, node: str, gpus: set[int] | None = None) -> list[SimWorkload]:
        """Running workloads with a worker on `node` (and on one of `gpus`, when given), in submit order."""
        state = self.nodes[node]
        seen: dict[int, SimWorkload] = {}
        for slot in state.slots:
            if gpus is not None and slot.index not in gpus:
                continue
            for allocation in slot.holders:
                seen.setdefault(allocation.workload.pk, allocation.workload)
        return [seen[pk] for pk in sorted(seen)]

    def _log(self, workload: SimWorkload, text: str, at: datetime) -> None:
        self._new_events.append(SimEvent(workload=workload, at=at, text=text[:500]))
        self._touch(workload)

    def _touch(self, workload: SimWorkload) -> None:
        self._dirty_workloads[workload.pk] = workload

    # Nodes

    def node(self, name: str) -> NodeState:
        node = self.nodes.get(name)
        if node is None:
            first, last = self.fleet[0].name, self.fleet[-1].name
            raise NotFoundError(
                f"no node {name!r} in simulated cluster {self.sim.cluster.name!r} "
                f"(it has {len(self.fleet)} nodes, {first} to {last})"
            )
        return node

    def _ops(self, name: str) -> SimNode:
        if name not in self.ops:
            self.ops[name] = SimNode(sim=self.sim, name=name)
        self._dirty_ops.add(name)
        return self.ops[name]

    def cordon(self, name: str, reason: str = "") -> None:
        node = self.node(name)
        ops = self._ops(name)
        ops.cordoned, ops.cordon_reason = True, reason or ops.cordon_reason or "cordoned"
        node.cordoned = True

    def uncordon(self, name: str) -> None:
        """Return the node to service; clears a drain too (as `kubectl uncordon` or `scontrol ... resume`)."""
        node = self.node(name)
        ops = self._ops(name)
        ops.cordoned, ops.cordon_reason, ops.drained, ops.drain_reason = False, "", False, ""
        node.cordoned = False
        self._place_pending(self.now)

    def resume(self, name: str) -> None:
        self.uncordon(name)

    def drain(self, name: str, reason: str = "") -> DrainResult:
        """Cordon, then evict every running workload with a worker here back to pending; they may restart elsewhere."""
        node = self.node(name)
        why = reason or "no reason given"
        ops = self._ops(name)
        ops.cordoned, ops.cordon_reason = True, f"drained: {why}"
        ops.drained, ops.drain_reason = True, why
        node.cordoned = True
        evicted = self._running_on(name)
        for workload in evicted:
            self._requeue(workload, f"requeued: node {name} drained ({why})")
        self._place_pending(self.now)
        return DrainResult(node=name, evicted=[w.name for w in evicted])

    def taint(self, name: str, taint: Taint) -> None:
        self.node(name)
        ops = self._ops(name)
        ops.taints = [t for t in ops.taints if t["key"] != taint.key] + [
            {"key": taint.key, "value": taint.value, "effect": taint.effect}
        ]
        self.nodes[name].taints = [Taint(**t) for t in ops.taints]
        if taint.effect == "NoExecute":  # as on Kubernetes: running pods that do not tolerate it are evicted
            for workload in self._running_on(name):
                if taint.key not in tolerations_from_labels(workload.spec.get("labels", {})):
                    self._requeue(workload, f"requeued: node {name} tainted {taint.key}:NoExecute")
            self._place_pending(self.now)

    def untaint(self, name: str, key: str) -> None:
        self.node(name)
        ops = self._ops(name)
        ops.taints = [t for t in ops.taints if t["key"] != key]
        self.nodes[name].taints = [Taint(**t) for t in ops.taints]
        self._place_pending(self.now)

    # Faults

    def active_faults(self, node: str | None = None) -> list[SimFault]:
        return [f for f in self.faults if f.active and (node is None or f.node == node)]

    def inject(self, node_name: str, kind: str, gpu: int | None = None, reason: str = "") -> tuple[SimFault, bool]:
        """Inject a fault; returns (fault, created). An identical active fault is returned as is."""
        node = self.node(node_name)
        try:
            kind = parse_kind(kind)
        except ValueError as exc:
            raise PermanentBackendError(str(exc)) from None
        effect = EFFECTS[kind]
        if gpu is not None:
            if kind not in GPU_KINDS:
                raise PermanentBackendError(f"{kind} hits the whole node; do not name a GPU")
            if not 0 <= gpu < len(node.slots):
                raise NotFoundError(
                    f"no GPU {gpu} on node {node_name} (it has {len(node.slots)}: 0 to {len(node.slots) - 1})"
                )
        for fault in self.active_faults(node_name):
            if fault.kind == kind and fault.gpu_index == gpu:
                return fault, False
        fault = SimFault(sim=self.sim, node=node_name, gpu_index=gpu, kind=kind, reason=reason, injected_at=self.now)
        self.faults.append(fault)
        self._dirty_faults.append(fault)
        self._apply_faults(node, self.active_faults(node_name))
        if effect.fails_workloads:
            hit = None if gpu is None else {gpu}
            where = node_name if gpu is None else f"{node_name} GPU {gpu}"
            for workload in self._running_on(node_name, hit):
                self._end(workload, BackendState.FAILED, f"{effect.message} on {where}", self.now)
            self._place_pending(self.now)
        return fault, True

    def clear(self, fault_id: int) -> SimFault:
        """Clear an active fault (the GPU was reset, the node rebooted); its GPUs and node return to service."""
        fault = next((f for f in self.faults if f.pk == fault_id), None)
        if fault is None:
            raise NotFoundError(f"no fault {fault_id} in simulated cluster {self.sim.cluster.name!r}")
        if fault.active:
            fault.cleared_at = self.now
            self._dirty_faults.append(fault)
            self._apply_faults(self.nodes[fault.node], self.active_faults(fault.node))
            self._place_pending(self.now)
        return fault

    def faults_by_node(self) -> dict[str, list[SimFault]]:
        """Active faults per node name (nodes without any are absent)."""
        index: dict[str, list[SimFault]] = {}
        for fault in self.faults:
            if fault.active:
                index.setdefault(fault.node, []).append(fault)
        return index

    # Quotas

    def push_quotas(self, rows: dict[str, dict]) -> tuple[int, int]:
        """Store quotas keyed tenant/queue/model; returns (applied, unchanged)."""
        current = dict(self.sim.quotas)
        applied = sum(1 for key, value in rows.items() if current.get(key) != value)
        current.update(rows)
        self.sim.quotas = current
        self.sim.quotas_pushed_at = self.now
        self.sim.save(update_fields=["quotas", "quotas_pushed_at"])
        return applied, len(rows) - applied

    def push_prepulls(self, pools: dict[str, list[str]]) -> int:
        """Store the images each pool pre-pulls: an image already listed keeps the time its nodes had it, a new one
        is there once its pull is done (the nodes pull in parallel). Returns how many pools changed."""
        current = dict(self.sim.prepulled or {})
        wanted = {}
        for pool, images in sorted(pools.items()):
            held = current.get(pool, {})
            wanted[pool] = {
                image: held.get(image) or (self.now + timedelta(seconds=pull_s(image))).isoformat() for image in images
            }
        changed = sum(1 for pool in set(current) | set(wanted) if current.get(pool) != wanted.get(pool))
        if changed:
            self.sim.prepulled = wanted
            self.sim.save(update_fields=["prepulled"])
        return changed


def is_due(sim: SimCluster, real_now: datetime | None = None) -> bool:
    """Has a running workload's end passed since the state was last saved? (No lock, no load.)"""
    return sim.next_event_at is not None and sim.next_event_at <= sim.sim_now(real_now or timezone.now())
