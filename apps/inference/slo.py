"""Multi-window, multi-burn-rate alerts on each service's TTFT and TPOT objectives.

The error budget is 1 - objective (1 % for 99 %). A window's burn rate is its share of slow observations
divided by the budget: 1 spends the budget exactly over the SLO period, 14.4 spends 2 % of a 30-day budget
in one hour. As in the Google SRE workbook's recommended policy, an alert fires only when a long window AND
its short window both burn above the threshold: the long window keeps a short blip from paging, the short
one lets the alert resolve soon after the service recovers.

  fast burn: 1 h and 5 min above 14.4      slow burn: 6 h and 30 min above 6

A pair is judged only once the service has samples reaching back at least its short window: on a service's
first scrapes every window holds the same few minutes, and a cold start would page at once.

Windows sum the samples' counts (one grouped query for every service and window). At most one firing alert
exists per service, SLI and window pair (a partial unique constraint), so a sustained breach fires once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Min, Q, Sum

from apps.inference.models import AlertState, BurnWindow, ServiceAlert, Sli, TelemetrySample


@dataclass(frozen=True)
class WindowPair:
    long_s: int
    short_s: int
    threshold: float


PAIRS = {
    BurnWindow.FAST: WindowPair(3600, 300, 14.4),
    BurnWindow.SLOW: WindowPair(6 * 3600, 1800, 6.0),
}
SECONDS = sorted({s for pair in PAIRS.values() for s in (pair.long_s, pair.short_s)})
_COLUMNS = {Sli.TTFT: ("requests", "ttft_slow"), Sli.TPOT: ("tokens", "tpot_slow")}


def window_counts(ids, now: datetime) -> dict[int, dict[tuple[str, int], tuple[float, float]]]:
    """{workload: {(sli, window seconds): (observations, slow)}} over the windows ending at `now`; the key
    "since" holds the oldest sample's time within the longest window."""
    aggregates: dict = {"since": Min("time")}
    for seconds in SECONDS:
        recent = Q(time__gt=now - timedelta(seconds=seconds), time__lte=now)
        for sli, (total, slow) in _COLUMNS.items():
            aggregates[f"{sli}_total_{seconds}"] = Sum(total, filter=recent)
            aggregates[f"{sli}_slow_{seconds}"] = Sum(slow, filter=recent)
    rows = (
        TelemetrySample.objects.filter(workload_id__in=ids, time__gt=now - timedelta(seconds=max(SECONDS)))
        .values("workload_id")
        .annotate(**aggregates)
    )
    return {
        row["workload_id"]: {
            "since": row["since"],
            **{
                (sli, seconds): (row[f"{sli}_total_{seconds}"] or 0.0, row[f"{sli}_slow_{seconds}"] or 0.0)
                for sli in _COLUMNS
                for seconds in SECONDS
            },
        }
        for row in rows
    }


def burn_rate(counts: tuple[float, float], objective: float) -> float | None:
    total, slow = counts
    if total <= 0:
        return None
    return (slow / total) / (1 - objective)


def burn_rates(ids, now: datetime) -> dict[int, dict]:
    """{workload: {(sli, window seconds): burn rate or None (no observations), "since": oldest sample}}."""
    from apps.inference.scrape import slo_targets

    counts = window_counts(ids, now)
    slos = slo_targets(list(counts))
    return {
        pk: {key: value if key == "since" else burn_rate(value, slos[pk].objective) for key, value in windows.items()}
        for pk, windows in counts.items()
    }


def evaluate_slos(ids, now: datetime) -> int:
    """Fire and resolve burn-rate alerts for the services `ids`; returns how many fired."""
    from apps.inference.notify import AlertEvent, notify

    rates = burn_rates(ids, now)
    firing = {
        (a.workload_id, a.sli, a.window): a
        for a in ServiceAlert.objects.filter(workload_id__in=ids, state=AlertState.FIRING).select_related(
            "workload__tenant"
        )
    }
    fired = 0
    for pk, windows in rates.items():
        for sli in _COLUMNS:
            for name, pair in PAIRS.items():
                long_rate, short_rate = windows[(sli, pair.long_s)], windows[(sli, pair.short_s)]
                covered = (now - windows["since"]).total_seconds() >= pair.short_s
                breach = (
                    covered
                    and long_rate is not None
                    and short_rate is not None
                    and long_rate >= pair.threshold
                    and short_rate >= pair.threshold
                )
                open_alert = firing.get((pk, sli, name))
                if breach and open_alert is None:
                    alert = _fire(pk, sli, name, pair, long_rate, short_rate, now)
                    if alert is not None:
                        fired += 1
                elif not breach and open_alert is not None:
                    with transaction.atomic():
                        open_alert.state, open_alert.resolved_at = AlertState.RESOLVED, now
                        open_alert.save(update_fields=["state", "resolved_at"])
                        notify(AlertEvent(open_alert, "resolved"))
    return fired


def _fire(pk: int, sli: str, name: str, pair: WindowPair, long_rate: float, short_rate: float, now: datetime):
    from apps.inference.notify import AlertEvent, notify

    label = dict(Sli.choices)[sli]
    message = (
        f"{label} is burning its error budget {long_rate:.1f}x over {pair.long_s // 60} min "
        f"and {short_rate:.1f}x over {pair.short_s // 60} min (threshold {pair.threshold:g}x)"
    )
    try:
        with transaction.atomic():
            alert = ServiceAlert.objects.create(
                workload_id=pk,
                sli=sli,
                window=name,
                fired_at=now,
                burn_long=long_rate,
                burn_short=short_rate,
                threshold=pair.threshold,
                message=message,
            )
            notify(AlertEvent(alert, "fired"))
    except IntegrityError:  # a concurrent cycle fired it first
        return None
    return alert
