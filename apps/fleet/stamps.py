"""Fan-out stamps (FanOutStamp): at most one task of a kind per cluster queued or running.

`claim` is the fan-out's compare-and-set (one INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING for every cluster);
`running` wraps the task's work (started, then finished whether it raised or not); `requeue` is for a task that
sends its own successor. A stamp that neither finished nor moved for FAN_OUT_STAMP_EXPIRY_S is taken as lost.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.fleet.models import Cluster, FanOutStamp


def claim(kind: str, cluster_ids: list[int]) -> list[int]:
    """Stamp as queued now every cluster of `cluster_ids` whose last `kind` task finished, that never had one, or
    whose stamp expired; the others keep theirs. Returns the clusters stamped (theirs is the task to send)."""
    if not cluster_ids:
        return []
    now = timezone.now()
    stale = now - timedelta(seconds=settings.FAN_OUT_STAMP_EXPIRY_S)
    stamp, clusters = FanOutStamp._meta.db_table, Cluster._meta.db_table
    adapt = connection.ops.adapt_datetimefield_value
    marks = ", ".join(["%s"] * len(cluster_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {stamp} (cluster_id, kind, queued_at, started_at, finished_at) "  # noqa: S608 - table names
            f"SELECT id, %s, %s, NULL, NULL FROM {clusters} WHERE id IN ({marks}) "
            "ON CONFLICT (cluster_id, kind) DO UPDATE SET queued_at = excluded.queued_at, started_at = NULL, "
            f"finished_at = NULL WHERE {stamp}.finished_at IS NOT NULL "
            f"OR COALESCE({stamp}.started_at, {stamp}.queued_at) < %s "
            "RETURNING cluster_id",
            [kind, adapt(now), *cluster_ids, adapt(stale)],
        )
        claimed = {row[0] for row in cursor.fetchall()}
    return [cluster_id for cluster_id in cluster_ids if cluster_id in claimed]


def release(kind: str, cluster_ids: list[int]) -> None:
    """Clear stamps whose task was never sent (the broker refused it), so the next fan-out sends it."""
    FanOutStamp.objects.filter(kind=kind, cluster_id__in=cluster_ids, started_at__isnull=True).update(
        finished_at=timezone.now()
    )


def requeue(kind: str, cluster_id: int) -> None:
    """Stamp the cluster's `kind` as queued again now: the running task is sending its successor (its own end then
    leaves the stamp to the successor, see `running`)."""
    FanOutStamp.objects.filter(kind=kind, cluster_id=cluster_id).update(
        queued_at=timezone.now(), started_at=None, finished_at=None
    )


@contextmanager
def running(kind: str, cluster_id: int) -> Iterator[None]:
    """Around a stamped task's work: the stamp says started, then finished when the work ends, raised or not. Only
    the stamp this run started is finished: one queued again meanwhile (requeue, or a fan-out after it expired) stays
    for the task it was queued for."""
    started = timezone.now()
    FanOutStamp.objects.filter(kind=kind, cluster_id=cluster_id, finished_at__isnull=True).update(started_at=started)
    try:
        yield
    finally:
        FanOutStamp.objects.filter(kind=kind, cluster_id=cluster_id, started_at=started).update(
            finished_at=timezone.now()
        )
