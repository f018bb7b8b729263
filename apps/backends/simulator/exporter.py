"""What a simulated node's dcgm-exporter, or a simulated inference service's engines, answer to a scrape.

A 1,280-node fleet scraped every 15 s is about 85 scrapes a second, so a scrape must not load the
whole simulation: it reads the cluster row, the node's faults and the node's open allocations (three
queries) and takes no lock. Only when a run has ended since the state was last saved (`is_due`) does
it tick the engine once, and then it renders from that loaded state.

A service's scrape reads the cluster row, the workload row and when its replicas serve (one aggregate); the engines'
numbers come from `serving.py`, which needs only the spec, the start time, the replicas' cold starts and the seed.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Max

from apps.backends.simulator import reports
from apps.backends.simulator.engine import Engine, is_due, replica_start
from apps.backends.simulator.faults import EFFECTS, SILENCES_EXPORTER, FaultKind
from apps.backends.simulator.hardware import MODELS
from apps.backends.simulator.models import SimAllocation, SimCluster, SimFault, SimWorkload
from apps.backends.simulator.placement import GpuSlot, occupy
from apps.backends.simulator.serving import ENGINES, ServiceProfile, render_service_metrics
from apps.backends.simulator.shape import nodes_by_name
from apps.backends.simulator.specs import served_model
from apps.backends.simulator.telemetry import render_node_metrics
from apps.backends.types import (
    ENGINE_LABEL,
    ENGINES_LABEL,
    KIND_LABEL,
    MAX_REPLICAS_LABEL,
    MIN_REPLICAS_LABEL,
    WAITING_THRESHOLD_LABEL,
    BackendState,
    MetricsAnswer,
)

ExporterAnswer = MetricsAnswer  # 200, 404 (no such simulated cluster or node), 503 (exporter or node down)


def _simulation(cluster_name: str) -> SimCluster | None:
    return (
        SimCluster.objects.select_related("cluster")
        .filter(cluster__name=cluster_name, cluster__kind="simulated")
        .first()
    )


def scrape(cluster_name: str, node_name: str) -> ExporterAnswer:
    sim = _simulation(cluster_name)
    if sim is None:
        return ExporterAnswer(404, f"no simulated cluster {cluster_name!r}\n")
    shape = sim.fleet_shape()
    spec = nodes_by_name(shape).get(node_name)
    if spec is None:
        return ExporterAnswer(404, f"no node {node_name!r} in simulated cluster {cluster_name!r}\n")
    if is_due(sim):
        with Engine.open(sim.cluster) as engine:
            silenced = _silenced(engine.active_faults(node_name))
            if silenced:
                return silenced
            return ExporterAnswer(200, reports.node_metrics(engine, node_name))
    faults = list(SimFault.objects.filter(sim=sim, node=node_name).order_by("id"))
    silenced = _silenced([f for f in faults if f.active])
    if silenced:
        return silenced
    slots = [GpuSlot(gpu.index) for gpu in spec.gpus]
    for allocation in SimAllocation.objects.filter(sim=sim, node=node_name, ended_at__isnull=True).select_related(
        "workload"
    ):
        for index in allocation.gpu_indexes:
            occupy(slots[index], allocation.mode, allocation.share, allocation)
    now = sim.sim_now()
    text = render_node_metrics(
        spec,
        MODELS[spec.model],
        reports.gpu_loads(slots, now),
        faults,
        seed=shape.seed,
        now=now,
        booted_at=sim.booted_at,
        hostname_label=shape.hostname_label,
        nvlink_traffic=shape.nvlink_traffic,
    )
    return ExporterAnswer(200, text)


def scrape_many(cluster, nodes: list[str]) -> dict[str, ExporterAnswer]:
    """What each of `nodes` would answer, rendered from one load of the simulation (one short lock).

    A poller reading the whole fleet every 15 s pays one load instead of three queries per node.
    """
    out: dict[str, ExporterAnswer] = {}
    with Engine.open(cluster) as engine:
        active = engine.faults_by_node()
        for node in nodes:
            if node not in engine.nodes:
                out[node] = ExporterAnswer(404, f"no node {node!r} in simulated cluster {cluster.name!r}\n")
                continue
            out[node] = _silenced(active.get(node, [])) or ExporterAnswer(200, reports.node_metrics(engine, node))
    return out


def _silenced(active_faults: list[SimFault]) -> ExporterAnswer | None:
    for fault in active_faults:
        if fault.kind in SILENCES_EXPORTER:
            return ExporterAnswer(503, f"{EFFECTS[FaultKind(fault.kind)].message}\n")
    return None


def service_profile(workload: SimWorkload, seed: int, cold: tuple[int, int] | None = None) -> ServiceProfile | None:
    """The serving profile of a running inference workload (None for anything else). `cold`: (seconds its first
    replicas took to serve, seconds a replica added later takes), see `cold_starts`."""
    spec = workload.spec
    labels = spec.get("labels", {})
    engine = labels.get(ENGINE_LABEL)
    if labels.get(KIND_LABEL) != "inference" or engine not in ENGINES or workload.started_at is None:
        return None
    replicas = max(1, spec.get("workers", 1) // max(spec.get("gang_min") or 1, 1))
    if labels.get(ENGINES_LABEL):  # a disaggregated service: its prefill and decode engines, not its GPU chunks
        replicas = int(labels[ENGINES_LABEL])
    threshold = labels.get(WAITING_THRESHOLD_LABEL)
    timing = {"ready_after_s": cold[0], "scale_up_s": cold[1]} if cold is not None else {}
    return ServiceProfile(
        name=workload.name,
        engine=engine,
        model=served_model(spec.get("command", [])),
        seed=seed,
        started_at=workload.started_at,
        replicas=replicas,
        min_replicas=int(labels.get(MIN_REPLICAS_LABEL, replicas)),
        max_replicas=int(labels.get(MAX_REPLICAS_LABEL, replicas)),
        waiting_threshold=int(threshold) if threshold else None,
        **timing,
    )


def cold_starts(sim: SimCluster, workload: SimWorkload) -> tuple[int, int]:
    """(seconds from the run's start until its first replicas all serve, seconds a replica added later takes to
    serve): the first from its replicas' ready times (one query), the second as a replica scheduled then would take
    on a node of its pool (coldstart.py), with the warm cache full by then."""
    started = workload.started_at
    ready = SimAllocation.objects.filter(workload=workload, ended_at__isnull=True, ready_at__isnull=False).aggregate(
        last=Max("ready_at")
    )["last"]
    first = max(0, int((ready - started).total_seconds())) if ready and started else 0
    later = (started or sim.sim_now()) + timedelta(seconds=first)
    return first, replica_start(sim, workload, workload.gpu_model, later).total_s


def scrape_service(cluster_name: str, name: str) -> ExporterAnswer:
    """A service's engines' /metrics: 404 for no such inference service, 503 while it is not serving."""
    sim = _simulation(cluster_name)
    if sim is None:
        return ExporterAnswer(404, f"no simulated cluster {cluster_name!r}\n")
    if is_due(sim):
        with Engine.open(sim.cluster):
            pass  # tick: a run that ended since the last save ends now
    workload = SimWorkload.objects.filter(sim=sim, name=name).first()
    if workload is None or workload.spec.get("labels", {}).get(KIND_LABEL) != "inference":
        return ExporterAnswer(404, f"no inference service {name!r} in simulated cluster {cluster_name!r}\n")
    if workload.state != BackendState.RUNNING:
        return ExporterAnswer(503, f"service {name!r} is not serving ({workload.state})\n")
    profile = service_profile(workload, sim.seed, cold_starts(sim, workload))
    if profile is None:
        return ExporterAnswer(404, f"{name!r} has no engine this simulator knows\n")
    return ExporterAnswer(200, render_service_metrics(profile, sim.sim_now()).text)
