"""Quantiles and threshold counts from Prometheus histogram buckets, with `histogram_quantile` semantics. Pure.

Buckets are (upper bound, cumulative count) pairs sorted by bound, the last one +Inf. As Prometheus does:
* the rank is q x total; the answer lies in the first bucket whose cumulative count reaches the rank, found
  by linear interpolation between that bucket's lower bound (the previous bound, or 0 for the first bucket)
  and its upper bound;
* a rank in the +Inf bucket answers the highest finite bound;
* no observations answer None (Prometheus: NaN).

Deltas between two scrapes are taken per series and per bucket; a series whose counts went down was
restarted, so its whole current value is the delta (Prometheus' counter-reset rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Buckets = Sequence[tuple[float, float]]


def histogram_quantile(q: float, buckets: Buckets) -> float | None:
    """The q-quantile (0 <= q <= 1) of the observations the cumulative `buckets` describe."""
    if not buckets or not math.isinf(buckets[-1][0]):
        raise ValueError("buckets must end with +Inf")
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for index, (bound, count) in enumerate(buckets):
        if count >= rank:
            if math.isinf(bound):
                return buckets[-2][0] if len(buckets) > 1 else None
            if index == 0 and bound <= 0:
                return bound
            in_bucket = count - previous_count
            if in_bucket <= 0:
                return bound
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / in_bucket
        previous_bound, previous_count = bound, count
    return buckets[-2][0] if len(buckets) > 1 else None  # unreachable with monotonic buckets


def count_above(threshold: float, buckets: Buckets) -> float:
    """Observations above `threshold`, interpolating linearly inside the bucket that holds it."""
    total = buckets[-1][1]
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in buckets:
        if math.isinf(bound):
            return total - previous_count  # everything past the last finite bound is above any threshold there
        if threshold <= bound:
            if threshold <= previous_bound:
                return total - previous_count
            within = (count - previous_count) * (threshold - previous_bound) / (bound - previous_bound)
            return total - (previous_count + within)
        previous_bound, previous_count = bound, count
    return 0.0


def series_delta(current: Sequence[float], previous: Sequence[float] | None) -> list[float]:
    """Per-bucket increase of one series since the previous scrape; a reset (any count lower) counts from 0."""
    if previous is None or len(previous) != len(current) or any(c < p for c, p in zip(current, previous, strict=True)):
        return list(current)
    return [c - p for c, p in zip(current, previous, strict=True)]
