"""Billing periods (UTC calendar months) and the boundaries a usage record is split at."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from apps.chargeback.models import Period


def month_start(at: datetime) -> datetime:
    at = at.astimezone(UTC)
    return datetime(at.year, at.month, 1, tzinfo=UTC)


def next_month(start: datetime) -> datetime:
    return datetime(start.year + (start.month == 12), start.month % 12 + 1, 1, tzinfo=UTC)


def day_start(at: datetime) -> datetime:
    at = at.astimezone(UTC)
    return datetime(at.year, at.month, at.day, tzinfo=UTC)


def split_points(start: datetime, end: datetime, extra: list[datetime] = ()) -> list[tuple[datetime, datetime]]:
    """[start, end) cut at every UTC midnight (month starts are midnights) and at the `extra` instants inside it."""
    cuts = set()
    day = day_start(start) + timedelta(days=1)
    while day < end:
        cuts.add(day)
        day += timedelta(days=1)
    cuts.update(t for t in extra if start < t < end)
    edges = [start, *sorted(cuts), end]
    return list(itertools.pairwise(edges))


def period_for(at: datetime, cache: dict[datetime, Period] | None = None) -> Period:
    """The period holding `at`, created when first needed."""
    start = month_start(at)
    if cache is not None and start in cache:
        return cache[start]
    period, _ = Period.objects.get_or_create(start=start, defaults={"end": next_month(start)})
    if cache is not None:
        cache[start] = period
    return period


def current_period(at: datetime | None = None) -> Period:
    from django.utils import timezone

    return period_for(at or timezone.now())
