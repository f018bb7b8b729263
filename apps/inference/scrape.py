"""One telemetry cycle: scrape every running inference service the console deployed, store one sample each.

Claiming: a service is scraped by the cycle that moves its `last_attempt_at` forward with a conditional
UPDATE (older than half the interval), so overlapping cycles (a slow one and the next beat) never store
the same interval twice. Fetching holds no transaction; the samples and the state rows are written in
bulk, in one transaction, after every answer is in. Then the SLO windows are evaluated.

An endpoint that does not answer marks the service's telemetry STALE (the page shows since when); it never
touches the workload's state. An unreadable answer is stale too. A histogram with bad buckets is skipped
and counted, the rest of that scrape is kept.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.inference.models import ServiceSlo, ServiceTelemetry, TelemetrySample, TelemetryStatus
from apps.inference.parsing import EngineScrape, ExpositionError, parse_engine_metrics
from apps.inference.quantiles import count_above, histogram_quantile, series_delta
from apps.inference.sources import HTTP, IN_PROCESS, NONE, FetchError, fetch_http, fetch_in_process, source_for
from apps.workloads.models import Workload, WorkloadKind, WorkloadState

logger = logging.getLogger(__name__)

_STATE_FIELDS = [
    "source",
    "status",
    "last_attempt_at",
    "last_success_at",
    "last_error",
    "scrape_errors",
    "histogram_errors",
    "totals",
]


def _claim(ids: list[int], now: datetime) -> list[ServiceTelemetry]:
    ServiceTelemetry.objects.bulk_create([ServiceTelemetry(workload_id=pk) for pk in ids], ignore_conflicts=True)
    gap = timedelta(seconds=settings.INFERENCE_SCRAPE_INTERVAL_S / 2)
    ServiceTelemetry.objects.filter(workload_id__in=ids).filter(
        Q(last_attempt_at__isnull=True) | Q(last_attempt_at__lte=now - gap)
    ).update(last_attempt_at=now)
    return list(ServiceTelemetry.objects.filter(workload_id__in=ids, last_attempt_at=now))


def _namespaces(workloads: list[Workload]) -> dict[int, str]:
    """Each workload's namespace as the renderer picks it: the binding's first namespace, else the tenant slug."""
    from apps.tenancy.models import QueueBinding

    pairs = {(w.queue_id, w.cluster_id) for w in workloads}
    bound = {
        (b.queue_id, b.cluster_id): b.namespaces
        for b in QueueBinding.objects.filter(queue_id__in={q for q, _ in pairs}, cluster_id__in={c for _, c in pairs})
    }
    return {w.pk: (bound.get((w.queue_id, w.cluster_id)) or [w.tenant.slug])[0] for w in workloads}


def slo_targets(ids) -> dict[int, ServiceSlo]:
    """Each service's SLO: its row, or the defaults (unsaved) when nobody set one."""
    rows = {s.workload_id: s for s in ServiceSlo.objects.filter(workload_id__in=ids)}
    return {pk: rows.get(pk) or ServiceSlo(workload_id=pk) for pk in ids}


def scrape_services(now: datetime | None = None) -> dict:
    """Scrape every running inference service once; returns counts for logs and tests."""
    from apps.inference.slo import evaluate_slos

    now = now or timezone.now()
    running = list(
        Workload.objects.filter(kind=WorkloadKind.INFERENCE, state=WorkloadState.RUNNING)
        .exclude(backend_name="")
        .select_related("cluster", "tenant")
    )
    claimed = {t.workload_id: t for t in _claim([w.pk for w in running], now)} if running else {}
    workloads = [w for w in running if w.pk in claimed]
    namespaces = _namespaces(workloads)
    sources = {w.pk: source_for(w, namespaces[w.pk]) for w in workloads}
    answers: dict[int, str | FetchError] = fetch_http({pk: s.url for pk, s in sources.items() if s.kind == HTTP})
    for workload in workloads:
        if sources[workload.pk].kind == IN_PROCESS:
            answers[workload.pk] = fetch_in_process(workload.cluster, workload.backend_name)
    slos = slo_targets(claimed)
    samples, counts = [], {"services": len(workloads), "ok": 0, "stale": 0, "no_source": 0, "histogram_errors": 0}
    for workload in workloads:
        telemetry, source = claimed[workload.pk], sources[workload.pk]
        telemetry.source = source.url
        if source.kind == NONE:
            telemetry.status = TelemetryStatus.NO_SOURCE
            telemetry.last_error = "no metrics endpoint known: set inference_metrics_url in the cluster's connection"
            counts["no_source"] += 1
            continue
        answer = answers[workload.pk]
        try:
            if isinstance(answer, FetchError):
                raise answer
            parsed = parse_engine_metrics(answer, workload.spec.get("engine", "vllm"))
        except (FetchError, ExpositionError) as exc:
            telemetry.status = TelemetryStatus.STALE
            telemetry.last_error = str(exc)[:500]
            telemetry.scrape_errors += 1
            counts["stale"] += 1
            continue
        fields, telemetry.totals = interval_sample(parsed, telemetry.totals, now, slos[workload.pk])
        samples.append(TelemetrySample(workload_id=workload.pk, time=now, **fields))
        telemetry.status, telemetry.last_success_at = TelemetryStatus.OK, now
        telemetry.histogram_errors += len(parsed.errors)
        telemetry.last_error = "; ".join(parsed.errors)[:500]
        counts["histogram_errors"] += len(parsed.errors)
        counts["ok"] += 1
    with transaction.atomic():
        TelemetrySample.objects.bulk_create(samples, batch_size=500)
        ServiceTelemetry.objects.bulk_update(list(claimed.values()), _STATE_FIELDS, batch_size=500)
    counts["samples"] = len(samples)
    counts["alerts"] = evaluate_slos([s.workload_id for s in samples], now) if samples else 0
    return counts


def interval_sample(parsed: EngineScrape, previous: dict, now: datetime, slo: ServiceSlo) -> tuple[dict, dict]:
    """(sample fields, totals to keep) from one scrape and the totals of the previous one.

    The first scrape of a service only records totals: its counters hold the engine's whole history.
    A series new since the previous scrape (a replica that started) counts from zero.
    """
    before_at = previous.get("at")
    interval = (now - datetime.fromisoformat(before_at)).total_seconds() if before_at else None
    has_baseline = interval is not None and interval > 0
    fields: dict = {
        "interval_s": interval if has_baseline else None,
        "running": parsed.running,
        "waiting": parsed.waiting,
        "kv_cache": parsed.kv_cache,
        "replicas": parsed.replicas,
    }
    totals: dict = {"at": now.isoformat(), "c": {}, "h": {}}
    for kind, series in parsed.counters.items():
        totals["c"][kind] = series
        if has_baseline:
            before = previous.get("c", {}).get(kind, {})
            delta = sum(series_delta([v], [before[k]] if k in before else None)[0] for k, v in series.items())
            fields[f"{'tokens' if kind == 'generation' else 'prompt_tokens'}_per_s"] = delta / interval
    if fields.get("tokens_per_s") is None and parsed.gen_throughput is not None:
        fields["tokens_per_s"] = parsed.gen_throughput
    targets = {"ttft": slo.ttft_target_s, "tpot": slo.tpot_target_s}
    for kind in ("ttft", "tpot"):
        histogram = parsed.histograms.get(kind)
        kept = previous.get("h", {}).get(kind)
        if histogram is None:
            if kept is not None:
                totals["h"][kind] = kept  # skipped this time: the next good scrape spans both intervals
            continue
        finite = [b for b in histogram.bounds[:-1]]
        totals["h"][kind] = {"bounds": finite, "series": histogram.series}
        if not has_baseline:
            continue
        same_layout = kept is not None and kept.get("bounds") == finite
        before = kept["series"] if same_layout else {}
        summed = [0.0] * len(histogram.bounds)
        for key, values in histogram.series.items():
            for i, value in enumerate(series_delta(values, before.get(key))):
                summed[i] += value
        buckets = list(zip(histogram.bounds, summed, strict=True))
        observed = summed[-1]
        fields[f"{kind}_p50"] = histogram_quantile(0.5, buckets)
        fields[f"{kind}_p99"] = histogram_quantile(0.99, buckets)
        fields["requests" if kind == "ttft" else "tokens"] = observed
        fields[f"{kind}_slow"] = count_above(targets[kind], buckets) if observed else 0.0
    return fields, totals
