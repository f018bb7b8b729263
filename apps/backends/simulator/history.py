"""What the simulation's records say about the past, read straight from its tables (no engine load, no lock):
a workload's run as a log, and each GPU's utilization over a span for idle waste.

Both were read by the workloads and chargeback apps from these tables before; the SimulatorBackend now
answers them (`workload_logs`, `gpu_utilization`).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from datetime import datetime, timedelta

from django.db.models import Q

from apps.backends.simulator.models import SimAllocation, SimCluster, SimWorkload
from apps.backends.simulator.seeding import stable_hash
from apps.backends.simulator.telemetry import utilization_pct
from apps.backends.types import UtilizationSpan

MINUTE = timedelta(minutes=1)
# Above this load, the simulator's per-minute jitter (85-99 % of the load) cannot take a GPU below a
# few percent, so a constant-load stretch is one span at its mean; below it, minute by minute.
_FINE_LOAD = 0.06


def workload_log(cluster, name: str) -> list[str]:
    """The simulated run as a log: submission, each worker's placement, and how it ended."""
    sim_workload = SimWorkload.objects.filter(sim__cluster=cluster, name=name).first()
    if sim_workload is None:
        return []

    def stamp(when) -> str:
        return when.isoformat(timespec="seconds")

    entries = [(sim_workload.submitted_at, 0, f"submitted to {cluster.name} as {sim_workload.name}")]
    for a in SimAllocation.objects.filter(workload=sim_workload).order_by("started_at", "worker"):
        gpus = ",".join(str(i) for i in a.gpu_indexes)
        detail = f" ({a.mig_profile})" if a.mig_profile else ""
        entries.append((a.started_at, 1, f"worker {a.worker} started on {a.node} GPUs {gpus}{detail}"))
        if a.ended_at:
            entries.append((a.ended_at, 2, f"worker {a.worker} stopped on {a.node}"))
    if sim_workload.finished_at:
        reason = f": {sim_workload.reason}" if sim_workload.reason else ""
        entries.append((sim_workload.finished_at, 3, f"{sim_workload.state}{reason}"))
    return [f"{stamp(when)} {text}" for when, _, text in sorted(entries, key=lambda e: (e[0], e[1]))]


def gpu_utilization(
    cluster, gpus: dict[str, tuple[str, int]], start: datetime, end: datetime
) -> dict[str, list[UtilizationSpan]]:
    """Each GPU's load from its allocation history, with its telemetry jitter (the figure its exporter served for
    that minute). `gpus` maps a GPU UUID to its node and index."""
    sim = SimCluster.objects.filter(cluster=cluster).first()
    if sim is None:
        return {}
    seed = sim.fleet_shape().seed
    by_gpu: dict[tuple[str, int], list[tuple[datetime, datetime, float]]] = defaultdict(list)
    for node, indexes, share, started, ended in (
        SimAllocation.objects.filter(sim=sim, node__in={node for node, _ in gpus.values()}, started_at__lt=end)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        .values_list("node", "gpu_indexes", "share", "started_at", "ended_at")
    ):
        for index in indexes:
            by_gpu[(node, index)].append((max(started, start), min(ended or end, end), share))
    out: dict[str, list[UtilizationSpan]] = {}
    for uuid, (node, index) in gpus.items():
        spans = []
        for seg_start, seg_end, load in _constant_loads(by_gpu.get((node, index), []), start, end):
            if load <= 0 or load >= _FINE_LOAD:
                spans.append(UtilizationSpan(seg_start, seg_end, min(100.0, load * 92)))
                continue
            minute = seg_start.replace(second=0, microsecond=0)
            while minute < seg_end:
                jitter = stable_hash(seed, uuid, int(minute.timestamp() // 60))
                spans.append(
                    UtilizationSpan(
                        max(minute, seg_start), min(minute + MINUTE, seg_end), utilization_pct(load, jitter)
                    )
                )
                minute += MINUTE
        out[uuid] = spans
    return out


def _constant_loads(allocations, start: datetime, end: datetime):
    """(start, end, load) stretches of constant summed load over [start, end), from (start, end, share) allocations."""
    changes: dict[datetime, float] = defaultdict(float)
    for seg_start, seg_end, share in allocations:
        if seg_end > seg_start:
            changes[seg_start] += share
            changes[seg_end] -= share
    points = sorted({start, end, *changes})
    load = 0.0
    for left, right in itertools.pairwise(points):
        load += changes.get(left, 0.0)
        if left >= start and right <= end and right > left:
            yield left, right, round(load, 9)


_STUCK_FRAMES = (  # where a run the simulator hangs is stuck: an all-reduce that never completes
    "    ncclProxyProgress (libnccl.so.2)",
    "    c10d::ProcessGroupNCCL::WorkNCCL::synchronizeInternal (libtorch_cuda.so)",
    "    all_reduce (torch/distributed/distributed_c10d.py:2501)",
    "    wrapper (torch/distributed/c10d_logger.py:83)",
    "    _allreduce_grads (train.py:214)",
    "    train_step (train.py:251)",
    "    main (train.py:318)",
    "    <module> (train.py:342)",
)
_LOADING_FRAMES = (
    "    _next_data (torch/utils/data/dataloader.py:1328)",
    "    __next__ (torch/utils/data/dataloader.py:631)",
    "    train_epoch (train.py:188)",
    "    main (train.py:318)",
    "    <module> (train.py:342)",
)
_WORKING_FRAMES = (
    "    backward (torch/_tensor.py:521)",
    "    train_step (train.py:247)",
    "    main (train.py:318)",
    "    <module> (train.py:342)",
)


def stack_dump(cluster, namespace: str, pod: str, node: str, job: str) -> str | None:
    """A py-spy-like dump of the pod's main process (pods are named <run>-<worker>), from where its run is now:
    stuck in an NCCL all-reduce once it hangs, in the data loader during its idle phase, computing otherwise."""
    simulation = SimCluster.objects.filter(cluster=cluster).first()
    run = pod.rsplit("-", 1)[0] if "-" in pod else pod
    workload = SimWorkload.objects.filter(sim__cluster=cluster, name=run).first() if simulation else None
    if workload is None or workload.started_at is None:
        return None
    now = simulation.sim_now()
    into = (now - workload.started_at).total_seconds()
    if workload.hang_after_s is not None and into >= workload.hang_after_s:
        frames, state = _STUCK_FRAMES, "idle"
    elif workload.idle_phase_s and into < workload.idle_phase_s:
        frames, state = _LOADING_FRAMES, "idle"
    else:
        frames, state = _WORKING_FRAMES, "active"
    pid = 100 + stable_hash(pod, "pid") % 30000
    thread = stable_hash(pod, "thread") % (1 << 44) | (0x7F << 40)
    head = f"Process {pid}: python train.py (pod {namespace}/{pod} on {node})\nPython v3.11.9 (/usr/bin/python3.11)\n"
    return head + f'\nThread {pid} (0x{thread:x}) ({state}): "MainThread"\n' + "\n".join(frames) + "\n"
