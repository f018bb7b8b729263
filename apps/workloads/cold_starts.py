"""Inference replicas' cold starts: recorded from what the backends report, and summed up for the service page.

A backend's status of a service lists its replicas' starts (`WorkloadStatus.replica_starts`): on Kubernetes each
serving pod's PodScheduled and Ready conditions, in the simulator its replicas' image pull, weights and engine
start (apps/backends/simulator/coldstart.py). Reconcile records each replica when it first sees it and completes
the record when it serves: the time from being scheduled onto a node to serving is what pre-pulled images and warm
weights shorten.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime

from apps.workloads.models import ReplicaStart, Workload, WorkloadKind

SHOWN = 5  # the latest replicas the page lists
WINDOW = 100  # the median is of the latest this many (a long-lived autoscaled service starts thousands)


def record_replica_starts(workloads: list[Workload], statuses: dict) -> int:
    """Store the replicas the statuses name that are not stored yet, and complete those that serve now (one query
    for the ones named, one bulk insert, one bulk update); returns how many rows were written."""
    reported = {}
    for workload in workloads:
        status = statuses.get(workload.backend_name)
        if workload.kind != WorkloadKind.INFERENCE or status is None:
            continue
        for start in status.replica_starts:
            if start.ready_at is None or start.ready_at >= start.scheduled_at:
                reported[(workload.pk, start.replica[:253])] = start
    if not reported:
        return 0
    stored = {
        (row.workload_id, row.replica): row
        for row in ReplicaStart.objects.filter(
            workload_id__in={pk for pk, _ in reported}, replica__in={replica for _pk, replica in reported}
        )
    }
    new, served = [], []
    for (pk, replica), start in reported.items():
        row = stored.get((pk, replica))
        if row is None:
            new.append(
                ReplicaStart(
                    workload_id=pk,
                    replica=replica,
                    node=start.node[:253],
                    scheduled_at=start.scheduled_at,
                    ready_at=start.ready_at,
                    seconds=_seconds(start.scheduled_at, start.ready_at),
                )
            )
        elif row.ready_at is None and start.ready_at is not None:
            row.ready_at, row.seconds = start.ready_at, _seconds(row.scheduled_at, start.ready_at)
            served.append(row)
    ReplicaStart.objects.bulk_create(new, ignore_conflicts=True)  # a concurrent reconcile may have stored one
    if served:
        ReplicaStart.objects.bulk_update(served, ["ready_at", "seconds"])
    return len(new) + len(served)


def _seconds(scheduled: datetime, ready: datetime | None) -> float | None:
    return None if ready is None else (ready - scheduled).total_seconds()


@dataclass(frozen=True)
class ColdStarts:
    """A service's latest cold starts for its page (at most WINDOW replicas): the ones that serve (how many, their
    median, the last one, the slowest), the ones still starting, and the last few of all."""

    count: int
    median_s: float | None
    last_s: float | None
    slowest_s: float | None
    starting: list[ReplicaStart]
    latest: list[ReplicaStart]


def cold_starts(workload: Workload) -> ColdStarts | None:
    """The service's latest recorded replica starts (one query), or None before any was seen."""
    rows = list(ReplicaStart.objects.filter(workload=workload).order_by("-scheduled_at", "-id")[:WINDOW])
    if not rows:
        return None
    done = sorted((row for row in rows if row.seconds is not None), key=lambda row: (row.ready_at, row.pk))
    seconds = [row.seconds for row in done]
    return ColdStarts(
        count=len(done),
        median_s=statistics.median(seconds) if seconds else None,
        last_s=seconds[-1] if seconds else None,
        slowest_s=max(seconds) if seconds else None,
        starting=[row for row in rows if row.seconds is None],
        latest=rows[:SHOWN],
    )
