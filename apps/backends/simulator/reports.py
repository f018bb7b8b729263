"""What the simulator reports from a loaded Engine: inventory, workload status, usage and telemetry inputs.

Everything here reads the engine's in-memory state (plus at most one query), so a 1,280-node
inventory or a whole-fleet telemetry render costs the engine's constant number of queries.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db.models import Q

from apps.backends.simulator.engine import Engine
from apps.backends.simulator.faults import EFFECTS, FaultKind
from apps.backends.simulator.hardware import MIG_SLICES, MODELS, pool_of
from apps.backends.simulator.models import SimAllocation, SimEvent, SimWorkload
from apps.backends.simulator.placement import GpuSlot
from apps.backends.simulator.telemetry import GpuLoad, render_node_metrics
from apps.backends.types import (
    BackendState,
    GpuInfo,
    Inventory,
    NodeInfo,
    Placement,
    ReplicaStart,
    UsageRecord,
    WorkloadStatus,
)

_HEALTH_RANK = {"healthy": 0, "warning": 1, "unknown": 2, "unhealthy": 3}
# The simulated HGX boards (NVLink models) carry one InfiniBand HCA per GPU, as HGX H100/A100 systems do (a
# ConnectX per GPU), and their RDMA device plugin advertises them as this extended resource.
RDMA_RESOURCE = "rdma/ib"


def _gpu_health(faults, index: int, node_down: bool) -> tuple[str, str]:
    worst, reason = ("unknown", "node down") if node_down else ("healthy", "")
    for fault in faults:
        if fault.hits(index):
            effect = EFFECTS[FaultKind(fault.kind)]
            if effect.gpu_health and _HEALTH_RANK[effect.gpu_health] > _HEALTH_RANK[worst]:
                worst, reason = effect.gpu_health, effect.message
    return worst, reason


def _slot_fraction(slot: GpuSlot) -> float:
    if slot.mode == "mig":
        return min(slot.used / MIG_SLICES, 1.0)
    return min(max(slot.used, 0.0), 1.0)


def inventory(engine: Engine) -> Inventory:
    faults = engine.faults_by_node()
    nodes = []
    for spec in engine.fleet:
        state = engine.nodes[spec.name]
        model = MODELS[spec.model]
        ops = engine.ops.get(spec.name)
        node_faults = faults.get(spec.name, ())
        gpus = []
        for slot, gpu in zip(state.slots, spec.gpus, strict=True):
            health, reason = _gpu_health(node_faults, slot.index, state.down) if node_faults else ("healthy", "")
            holders = slot.holders
            gpus.append(
                GpuInfo(
                    index=gpu.index,
                    uuid=gpu.uuid,
                    model=model.dcgm_name,
                    memory_mib=model.memory_mib,
                    health=health,
                    health_reason=reason,
                    mig_enabled=slot.mode == "mig",
                    mig_instances=[
                        {"profile": a.mig_profile, "id": i, "allocated_to": a.workload.name}
                        for i, a in enumerate(holders)
                    ]
                    if slot.mode == "mig"
                    else [],
                    allocated_to=list(dict.fromkeys(a.workload.name for a in holders)),
                    allocated_fraction=_slot_fraction(slot),
                )
            )
        if state.down:
            node_state, state_reason = "down", EFFECTS[FaultKind.NODE_DOWN].message
        else:
            node_state, state_reason = "ready", ops.cordon_reason if ops and ops.cordoned else ""
        pool, purpose = pool_of(spec.model)
        nodes.append(
            NodeInfo(
                name=spec.name,
                state=node_state,
                state_reason=state_reason,
                unschedulable=state.cordoned,
                labels={
                    "nvidia.com/gpu.product": model.product_label,
                    "nvidia.com/gpu.count": str(len(spec.gpus)),
                    "nvidia.com/gpu.memory": str(model.memory_mib),
                    "nvidia.com/mig.capable": "true" if model.mig_slices else "false",
                    "topology.simulator/rack": spec.rack,
                    "topology.simulator/leaf-switch": spec.leaf_switch,
                },
                taints=list(state.taints),
                pool=pool,
                pool_purpose=purpose,
                rack=spec.rack,
                leaf_switch=spec.leaf_switch,
                nvlink_domain=spec.nvlink_domain,
                gpu_model=model.dcgm_name,
                # As the device plugin reports it: unhealthy GPUs drop out of allocatable.
                gpu_allocatable=sum(1 for slot in state.slots if slot.healthy),
                cpu_cores=spec.cpu_cores,
                memory_mib=spec.memory_mib,
                gpus=gpus,
                extended_resources={RDMA_RESOURCE: len(spec.gpus) if not state.down else 0} if model.nvlink else {},
            )
        )
    return Inventory(nodes=nodes, taken_at=engine.now)


MAX_EVENTS = 50  # the latest events a status carries


def _histories(engine: Engine, workloads: list[SimWorkload]) -> dict[int, list[str]]:
    """The latest events of each workload, in one query (after flushing this call's new ones)."""
    engine.save()
    out: dict[int, list[str]] = defaultdict(list)
    for event in SimEvent.objects.filter(workload__in=[w.pk for w in workloads]).order_by("id"):
        out[event.workload_id].append(str(event))
    return {pk: events[-MAX_EVENTS:] for pk, events in out.items()}


def workload_status(engine: Engine, workload: SimWorkload, events: list[str] | None = None) -> WorkloadStatus:
    if events is None:
        events = _histories(engine, [workload]).get(workload.pk, [])
    allocations = sorted(engine.allocations_of(workload), key=lambda a: a.worker)
    return WorkloadStatus(
        backend_id=workload.name,
        state=BackendState(workload.state),
        reason=workload.reason,
        placements=[Placement(node=a.node, gpu_indexes=list(a.gpu_indexes)) for a in allocations],
        started_at=workload.started_at,
        finished_at=workload.finished_at,
        events=events,
        replica_starts=replica_starts(workload, allocations, engine.now),
    )


def replica_starts(workload: SimWorkload, allocations: list[SimAllocation], now: datetime) -> list[ReplicaStart]:
    """A running inference service's replicas, each from its scheduling to its serving (coldstart.py), kept on the
    first worker of each replica. Named after the run, the replica and its start, so a restarted replica is new."""
    return [
        ReplicaStart(
            replica=f"{workload.name}-{allocation.worker}-{int(allocation.started_at.timestamp())}",
            node=allocation.node,
            scheduled_at=allocation.started_at,
            ready_at=allocation.ready_at if allocation.ready_at <= now else None,
        )
        for allocation in allocations
        if allocation.ready_at is not None
    ]


def statuses(engine: Engine, backend_ids: list[str]) -> dict[str, WorkloadStatus]:
    missing = [i for i in backend_ids if i not in engine.workloads]
    if missing:  # finished workloads are not loaded with the active state: one query for all of them
        for workload in SimWorkload.objects.filter(sim=engine.sim, name__in=missing):
            engine.workloads[workload.name] = workload
    found = [engine.workloads[i] for i in backend_ids if i in engine.workloads]
    histories = _histories(engine, found) if found else {}
    out = {}
    for backend_id in backend_ids:
        workload = engine.workloads.get(backend_id)
        out[backend_id] = (
            workload_status(engine, workload, histories.get(workload.pk, []))
            if workload is not None
            else WorkloadStatus(backend_id, BackendState.UNKNOWN, "not known to this simulated cluster")
        )
    return out


def usage_since(engine: Engine, since: datetime) -> list[UsageRecord]:
    """GPU time per workload run and GPU model in [since, now), from the allocation history."""
    engine.save()  # runs that started or ended during this call's tick must be in the table we read
    now = engine.now
    rows = (
        SimAllocation.objects.filter(sim=engine.sim, started_at__lt=now)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
        .select_related("workload")
        .order_by("workload_id", "started_at", "worker")
    )
    grouped: dict[tuple, list[SimAllocation]] = defaultdict(list)
    for row in rows:
        grouped[(row.workload_id, row.started_at, row.ended_at, row.gpu_model)].append(row)
    records = []
    for (_, started_at, ended_at, model), allocations in grouped.items():
        workload = allocations[0].workload
        start = max(started_at, since)
        end = min(ended_at or now, now)
        if end <= start:
            continue
        records.append(
            UsageRecord(
                backend_id=workload.name,
                tenant=workload.tenant,
                queue=workload.queue,
                gpu_model=model,
                gpu_fraction=sum(a.gpu_fraction for a in allocations),
                start=start,
                end=end,
                placements=[Placement(node=a.node, gpu_indexes=list(a.gpu_indexes)) for a in allocations],
                run_started_at=started_at,
            )
        )
    return records


def gpu_loads(slots: list[GpuSlot], now: datetime | None = None) -> list[GpuLoad]:
    """Per GPU: the load and the pod shown on it (the largest holder; a shared GPU shows one of its pods). An MPS
    GPU shows none: DCGM-Exporter cannot associate metrics with containers when the device plugin shares a GPU
    with MPS (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing-mps.html#limitations).

    With `now`, the part of the load whose runs compute at that instant (not hung, not in an idle phase)."""
    loads = []
    for slot in slots:
        if not slot.holders:
            loads.append(GpuLoad())
            continue
        top = max(slot.holders, key=lambda a: a.share)
        fraction = _slot_fraction(slot)
        if slot.mode == "mps":
            load = GpuLoad(fraction)
        else:
            load = GpuLoad(fraction, top.workload.tenant, f"{top.workload.name}-{top.worker}")
        if now is not None:
            quiet = [a for a in slot.holders if not a.workload.computing_at(now)]
            if quiet:
                total = sum(a.share for a in slot.holders) or 1.0
                load.computing = fraction * (1 - sum(a.share for a in quiet) / total)
        loads.append(load)
    return loads


def node_metrics(engine: Engine, node: str) -> str:
    """One node's exporter text from the loaded state (no query): for bulk renders and benchmarks."""
    spec = engine.node(node).spec
    return render_node_metrics(
        spec,
        MODELS[spec.model],
        gpu_loads(engine.nodes[node].slots, engine.now),
        [f for f in engine.faults if f.node == node],
        seed=engine.shape.seed,
        now=engine.now,
        booted_at=engine.sim.booted_at,
        hostname_label=engine.shape.hostname_label,
        nvlink_traffic=engine.shape.nvlink_traffic,
    )


def fleet_metrics(engine: Engine) -> dict[str, str]:
    """Every node's exporter text from one loaded state (exporter-down and down nodes included)."""
    return {spec.name: node_metrics(engine, spec.name) for spec in engine.fleet}
