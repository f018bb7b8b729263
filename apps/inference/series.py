"""What the service page and the API show: the time series over a window, the SLO and its burn rates."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from apps.inference.models import AlertState, ServiceAlert, ServiceTelemetry, TelemetrySample
from apps.inference.slo import PAIRS, burn_rates

WINDOWS = {"15m": 900, "1h": 3600, "6h": 6 * 3600, "24h": 24 * 3600}
DEFAULT_WINDOW = "1h"
MAX_POINTS = 720  # longer windows show every k-th sample
SERIES = (
    "ttft_p50",
    "ttft_p99",
    "tpot_p50",
    "tpot_p99",
    "running",
    "waiting",
    "kv_cache",
    "tokens_per_s",
    "prompt_tokens_per_s",
    "replicas",
)


def telemetry_series(workload, window: str = DEFAULT_WINDOW, now: datetime | None = None) -> dict:
    """Columns over the window ending now: {"time": [...], "ttft_p99": [...], ...} (None where not measured)."""
    now = now or timezone.now()
    rows = list(
        TelemetrySample.objects.filter(
            workload=workload, time__gt=now - timedelta(seconds=WINDOWS[window]), time__lte=now
        )
        .order_by("time")
        .values_list("time", *SERIES)
    )
    stride = max(1, -(-len(rows) // MAX_POINTS))
    rows = rows[::stride]
    columns = {"time": [row[0].isoformat() for row in rows]}
    for index, name in enumerate(SERIES, start=1):
        columns[name] = [row[index] for row in rows]
    return columns


def service_status(workload, now: datetime | None = None) -> dict:
    """Freshness, SLO targets, burn rates per window and the firing alerts."""
    from apps.inference.scrape import slo_targets

    now = now or timezone.now()
    telemetry = ServiceTelemetry.objects.filter(workload=workload).first()
    slo = slo_targets([workload.pk])[workload.pk]
    rates = burn_rates([workload.pk], now).get(workload.pk, {})
    burn = {
        sli: {
            name: {
                "threshold": pair.threshold,
                "long_window_s": pair.long_s,
                "short_window_s": pair.short_s,
                "long": rates.get((sli, pair.long_s)),
                "short": rates.get((sli, pair.short_s)),
            }
            for name, pair in PAIRS.items()
        }
        for sli in ("ttft", "tpot")
    }
    firing = ServiceAlert.objects.filter(workload=workload, state=AlertState.FIRING)
    return {
        "telemetry": {
            "status": telemetry.status if telemetry else "never",
            "source": telemetry.source if telemetry else "",
            "last_success_at": telemetry.last_success_at if telemetry else None,
            "last_attempt_at": telemetry.last_attempt_at if telemetry else None,
            "last_error": telemetry.last_error if telemetry else "",
            "scrape_errors": telemetry.scrape_errors if telemetry else 0,
            "histogram_errors": telemetry.histogram_errors if telemetry else 0,
        },
        "slo": {
            "ttft_target_s": slo.ttft_target_s,
            "tpot_target_s": slo.tpot_target_s,
            "objective": slo.objective,
            "custom": not slo._state.adding,  # False: the defaults
        },
        "burn_rates": burn,
        "alerts": [
            {
                "id": a.pk,
                "sli": a.sli,
                "window": a.window,
                "fired_at": a.fired_at,
                "burn_long": a.burn_long,
                "burn_short": a.burn_short,
                "message": a.message,
            }
            for a in firing
        ],
    }
