"""Idle waste: allocated GPU time during which the GPU's utilization stayed below the threshold.

For each new usage record with known placements, the GPUs' utilization rollups over the record's
interval give `idle_gpu_seconds` (the record's share of each GPU × the seconds that GPU was below
`CHARGEBACK_IDLE_UTILIZATION_PCT`, default 5 %) and `used_gpu_seconds` (the share × utilization).
Minutes with no rollup count as neither.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

from django.conf import settings

from apps.chargeback.fractions import SECOND_PLACES, exact_seconds, to_decimal
from apps.chargeback.utilization import utilization_rollups


def assess_waste(cluster, rows) -> None:
    """Fill idle/used GPU-seconds on unsaved rows that carry `_placements` (one rollup call for all)."""
    placed = [r for r in rows if getattr(r, "_placements", None)]
    if not placed:
        return
    from apps.fleet.models import Gpu

    wanted = {(p.node, i) for r in placed for p in r._placements for i in p.gpu_indexes}
    uuids = {
        (node, index): uuid
        for node, index, uuid in Gpu.objects.filter(
            node__cluster=cluster, node__name__in={node for node, _ in wanted}
        ).values_list("node__name", "index", "uuid")
    }
    start, end = min(r.start for r in placed), max(r.end for r in placed)
    spans = utilization_rollups(cluster, sorted({uuids[k] for k in wanted if k in uuids}), start, end)
    if not spans:
        return
    threshold = settings.CHARGEBACK_IDLE_UTILIZATION_PCT
    by_uuid = defaultdict(list, spans)
    for row in placed:
        gpus = [uuids.get((p.node, i)) for p in row._placements for i in p.gpu_indexes]
        if not gpus or any(g is None or g not in spans for g in gpus):
            continue
        share = Fraction(row.gpus) / len(gpus)  # each GPU of a record holds the same share
        idle = used = Fraction(0)
        for uuid in gpus:
            for span in by_uuid[uuid]:
                left, right = max(span.start, row.start), min(span.end, row.end)
                if right <= left:
                    continue
                seconds = exact_seconds(right - left)
                if span.utilization_pct < threshold:
                    idle += share * seconds
                used += seconds * min(share, Fraction(span.utilization_pct).limit_denominator(1000) / 100)
        row.idle_gpu_seconds = to_decimal(idle, SECOND_PLACES)
        row.used_gpu_seconds = to_decimal(used, SECOND_PLACES)
