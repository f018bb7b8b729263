"""GET /metrics: the console's state in Prometheus exposition format, read from the database at scrape time.

Domain series (workloads, quota use, admission waits, preemptions, rejections, the fleet's GPUs,
the outbox and the Celery queue, clusters' last contact) are computed by one collector in a fixed
number of queries, whatever the fleet's size; process series (request, task and backend-call
latency) come from apps/core/metrics.py. Label values are tenant slugs, queue and cluster names,
GPU model codes and fixed categories, so cardinality stays bounded by what admins configure;
prometheus_client escapes every label value.

Access: a request from an address in METRICS_ALLOWED_NETWORKS (default: loopback), or one that
sends `Authorization: Bearer <METRICS_TOKEN>`; anything else gets 403.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import time
from collections import defaultdict
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Min, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from apps.observability.reasons import reason_category

logger = logging.getLogger(__name__)

WAIT_BUCKETS = (10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400)
LIVE_STATES = ("pending", "admitted", "running", "cancelling")


def _wait_histogram() -> HistogramMetricFamily:
    """Submit → running, for every workload that started, per tenant, queue and GPU model."""
    from apps.workloads.models import Workload

    wait = ExpressionWrapper(F("started_at") - F("created_at"), output_field=DurationField())
    buckets = {f"le{i}": Count("id", filter=Q(wait__lte=timedelta(seconds=b))) for i, b in enumerate(WAIT_BUCKETS)}
    rows = (
        Workload.objects.filter(started_at__isnull=False)
        .annotate(wait=wait)
        .values("tenant__slug", "queue__name", "gpu_model__code")
        .annotate(n=Count("id"), total=Sum("wait"), **buckets)
    )
    family = HistogramMetricFamily(
        "gpuc_admission_wait_seconds",
        "Time from submission to running, per tenant, queue and GPU model",
        labels=["tenant", "queue", "gpu_model"],
    )
    for row in rows:
        cumulative = [(str(b), row[f"le{i}"]) for i, b in enumerate(WAIT_BUCKETS)] + [("+Inf", row["n"])]
        total = row["total"].total_seconds() if row["total"] is not None else 0.0
        family.add_metric([row["tenant__slug"], row["queue__name"], row["gpu_model__code"]], cumulative, total)
    return family


def _workload_families() -> list:
    from apps.workloads.models import Workload, WorkloadEvent

    live = GaugeMetricFamily(
        "gpuc_workloads", "Workloads not yet finished, by state", labels=["tenant", "queue", "gpu_model", "state"]
    )
    for row in (
        Workload.objects.filter(state__in=LIVE_STATES)
        .values("tenant__slug", "queue__name", "gpu_model__code", "state")
        .annotate(n=Count("id"))
    ):
        live.add_metric([row["tenant__slug"], row["queue__name"], row["gpu_model__code"], row["state"]], row["n"])

    preempted = CounterMetricFamily(
        "gpuc_preemptions",
        "Times work was preempted (reclaimed, drained or evicted), per tenant, queue and GPU model",
        labels=["tenant", "queue", "gpu_model"],
    )
    for row in (
        Workload.objects.filter(Q(requeues__gt=0) | Q(state="preempted"))
        .values("tenant__slug", "queue__name", "gpu_model__code")
        .annotate(requeued=Sum("requeues"), final=Count("id", filter=Q(state="preempted")))
    ):
        preempted.add_metric(
            [row["tenant__slug"], row["queue__name"], row["gpu_model__code"]], row["requeued"] + row["final"]
        )
    reclaims = CounterMetricFamily(
        "gpuc_reclaims",
        "Borrowed GPUs taken back for their lender: workloads preempted by a reclaim",
        labels=["tenant", "queue", "gpu_model"],
    )
    for row in (
        WorkloadEvent.objects.filter(kind="preempt")
        .values("workload__tenant__slug", "workload__queue__name", "workload__gpu_model__code")
        .annotate(n=Count("id"))
    ):
        reclaims.add_metric(
            [row["workload__tenant__slug"], row["workload__queue__name"], row["workload__gpu_model__code"]], row["n"]
        )
    rejected = CounterMetricFamily(
        "gpuc_rejected_submissions", "Submissions turned away, by reason category", labels=["tenant", "queue", "reason"]
    )
    counts: dict[tuple, int] = defaultdict(int)
    for row in (
        Workload.objects.filter(state="rejected")
        .values("tenant__slug", "queue__name", "state_reason")
        .annotate(n=Count("id"))
    ):
        counts[(row["tenant__slug"], row["queue__name"], reason_category(row["state_reason"]))] += row["n"]
    for labels, n in sorted(counts.items()):
        rejected.add_metric(list(labels), n)
    return [live, _wait_histogram(), preempted, reclaims, rejected]


def _quota_family() -> GaugeMetricFamily:
    from apps.tenancy.snapshot import build_snapshot

    family = GaugeMetricFamily(
        "gpuc_queue_gpus",
        "GPUs per queue and model: used, guaranteed, borrowed (from others) and lent (to others)",
        labels=["tenant", "queue", "gpu_model", "kind"],
    )
    snapshot, _ = build_snapshot(with_capacity=False)
    for (queue, model), quota in sorted(snapshot.quotas.items()):
        tenant, _, name = snapshot.names.get(queue, f"?/{queue}").partition("/")
        for kind, value in (
            ("used", quota.used),
            ("guaranteed", quota.guaranteed),
            ("borrowed", quota.borrowed),
            ("lent", quota.lent),
        ):
            family.add_metric([tenant, name, model, kind], value / snapshot.unit)  # GPUs (shares are fractions)
    return family


def _fleet_families() -> list:
    from apps.fleet.models import Cluster, Gpu

    unhealthy = Q(health="unhealthy")
    cordoned = ~unhealthy & Q(node__unschedulable=True)
    allocated = ~unhealthy & Q(node__unschedulable=False, allocated_fraction__gt=0)
    free = ~unhealthy & Q(node__unschedulable=False, allocated_fraction__lte=0)
    gpus = GaugeMetricFamily("gpuc_gpus", "GPUs by model and state", labels=["gpu_model", "state"])
    for row in (
        Gpu.objects.exclude(node__state="vanished")
        .values("model__code")
        .annotate(
            unhealthy=Count("id", filter=unhealthy),
            cordoned=Count("id", filter=cordoned),
            allocated=Count("id", filter=allocated),
            free=Count("id", filter=free),
        )
    ):
        for state in ("allocated", "free", "cordoned", "unhealthy"):
            gpus.add_metric([row["model__code"] or "unknown", state], row[state])

    now = timezone.now()
    age = GaugeMetricFamily(
        "gpuc_cluster_last_contact_seconds", "Seconds since the cluster was last synced", labels=["cluster"]
    )
    ok = GaugeMetricFamily("gpuc_cluster_up", "1 when the cluster's last sync succeeded", labels=["cluster", "kind"])
    for name, kind, status, last in Cluster.objects.values_list("name", "kind", "status", "last_sync_at"):
        if last is not None:
            age.add_metric([name], (now - last).total_seconds())
        ok.add_metric([name, kind], 1 if status == "ok" else 0)
    return [gpus, age, ok]


def _health_families() -> list:
    """Open incidents, the isolation budget per pool, GPUs by health, and each cluster's last telemetry cycle."""
    from apps.fleet.models import Node
    from apps.health.overview import fleet_summary

    summary = fleet_summary(Node.objects.all())
    incidents = GaugeMetricFamily("gpuc_open_incidents", "Open GPU health incidents by severity", labels=["severity"])
    for severity, n in summary["incidents_by_severity"]:
        incidents.add_metric([severity], n)
    health = GaugeMetricFamily("gpuc_gpu_health", "GPUs by the worst health finding on them", labels=["state"])
    for state, n in summary["gpus"]:
        health.add_metric([state], n)
    used = GaugeMetricFamily(
        "gpuc_isolation_budget_used", "Nodes isolated automatically in the last hour", labels=["cluster", "pool"]
    )
    limit = GaugeMetricFamily(
        "gpuc_isolation_budget_limit", "Nodes automation may isolate per hour", labels=["cluster", "pool"]
    )
    for budget in summary["budgets"]:
        labels = [budget["pool"].cluster.name, budget["pool"].name]
        used.add_metric(labels, budget["used"])
        limit.add_metric(labels, budget["limit"])
    now = timezone.now()
    took = GaugeMetricFamily(
        "gpuc_telemetry_scrape_duration_seconds", "Duration of the cluster's last telemetry cycle", labels=["cluster"]
    )
    age = GaugeMetricFamily(
        "gpuc_telemetry_last_cycle_seconds", "Seconds since the cluster's last telemetry cycle", labels=["cluster"]
    )
    errors = GaugeMetricFamily(
        "gpuc_telemetry_scrape_errors",
        "Problems in the cluster's last telemetry cycle: exporters that did not answer, malformed lines",
        labels=["cluster", "kind"],
    )
    for source in summary["sources"]:
        name = source.cluster.name
        if source.last_duration_ms is not None:
            took.add_metric([name], source.last_duration_ms / 1000)
        if source.last_cycle_at is not None:
            age.add_metric([name], (now - source.last_cycle_at).total_seconds())
        errors.add_metric([name, "unreachable"], source.last_unreachable)
        errors.add_metric([name, "malformed"], source.last_malformed)
    return [incidents, health, used, limit, took, age, errors]


def _inference_families() -> list:
    """Inference services' telemetry per tenant: how many are fresh or stale, scrape errors, firing SLO alerts."""
    from apps.inference.models import AlertState, ServiceAlert, ServiceTelemetry

    services = GaugeMetricFamily(
        "gpuc_inference_services", "Inference services by telemetry status", labels=["tenant", "status"]
    )
    errors = CounterMetricFamily(
        "gpuc_inference_scrape_errors",
        "Service scrapes that got no answer or an unreadable one (scrape), histograms skipped for bad buckets",
        labels=["tenant", "kind"],
    )
    totals: dict[tuple, int] = defaultdict(int)
    for row in (
        ServiceTelemetry.objects.values("workload__tenant__slug", "status")
        .annotate(n=Count("workload_id"), scrape=Sum("scrape_errors"), histogram=Sum("histogram_errors"))
        .order_by("workload__tenant__slug", "status")
    ):
        tenant = row["workload__tenant__slug"]
        services.add_metric([tenant, row["status"]], row["n"])
        totals[(tenant, "scrape")] += row["scrape"] or 0
        totals[(tenant, "histogram")] += row["histogram"] or 0
    for labels, n in sorted(totals.items()):
        errors.add_metric(list(labels), n)
    alerts = GaugeMetricFamily(
        "gpuc_inference_slo_alerts_firing", "SLO burn-rate alerts firing now", labels=["tenant", "sli", "window"]
    )
    for row in (
        ServiceAlert.objects.filter(state=AlertState.FIRING)
        .values("workload__tenant__slug", "sli", "window")
        .annotate(n=Count("id"))
        .order_by("workload__tenant__slug", "sli", "window")
    ):
        alerts.add_metric([row["workload__tenant__slug"], row["sli"], row["window"]], row["n"])
    return [services, errors, alerts]


def _chargeback_families() -> list:
    """Each tenant's cost to date in the current period (its whole subtree, as its statement shows it) and budget."""
    from apps.accounts.models import Tenant
    from apps.chargeback.budgets import subtree_costs
    from apps.chargeback.models import Period, SpendBudget
    from apps.chargeback.periods import month_start

    currency = settings.CHARGEBACK_CURRENCY
    cost = GaugeMetricFamily(
        "gpuc_cost_to_date",
        "Cost of the tenant's subtree in the current period, before credits",
        labels=["tenant", "currency"],
    )
    budget = GaugeMetricFamily("gpuc_spend_budget", "The tenant's monthly spend budget", labels=["tenant", "currency"])
    slugs = dict(Tenant.objects.values_list("id", "slug"))
    period = Period.objects.filter(start=month_start(timezone.now())).first()
    if period is not None:
        for tenant_id, amount in sorted(subtree_costs(period).items()):
            cost.add_metric([slugs.get(tenant_id, str(tenant_id)), currency], float(amount))
    for tenant_id, amount in SpendBudget.objects.values_list("tenant_id", "monthly_amount"):
        budget.add_metric([slugs.get(tenant_id, str(tenant_id)), currency], float(amount))
    return [cost, budget]


def _pipeline_families() -> list:
    from apps.workloads.models import OutboxEntry, OutboxStatus

    outbox = OutboxEntry.objects.filter(status__in=[OutboxStatus.PENDING, OutboxStatus.PROCESSING]).aggregate(
        n=Count("id"), oldest=Min("created_at"), last=Max("created_at")
    )
    backlog = GaugeMetricFamily("gpuc_outbox_backlog", "Backend calls waiting in the outbox")
    backlog.add_metric([], outbox["n"])
    oldest = GaugeMetricFamily("gpuc_outbox_oldest_seconds", "Age of the oldest waiting outbox entry (0: none)")
    oldest.add_metric([], (timezone.now() - outbox["oldest"]).total_seconds() if outbox["oldest"] else 0)
    families = [backlog, oldest]
    depths = _celery_queue_depths()
    if depths is not None:
        queue = GaugeMetricFamily("gpuc_celery_queue_depth", "Messages waiting in the Celery queue", labels=["queue"])
        for name, depth in depths.items():
            queue.add_metric([name], depth)
        families.append(queue)
    return families


def _celery_queue_depths() -> dict[str, int] | None:
    """Messages waiting per queue (settings.CELERY_QUEUE_NAMES: the default queue and the per-cluster ones)."""
    try:
        # The process's Celery app (console/celery.py makes it the default); observability sits below console.
        with current_app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            channel = conn.default_channel
            return {
                name: channel.queue_declare(queue=name, durable=True, auto_delete=False).message_count
                for name in settings.CELERY_QUEUE_NAMES
            }
    except Exception:  # a broker that does not answer leaves the series out (readyz says why)
        logger.warning("metrics: Celery queue depth unavailable", exc_info=True)
        return None


class ConsoleCollector:
    """Everything the console knows, read at scrape time in a fixed number of queries."""

    def collect(self):
        start = time.perf_counter()
        errors = 0
        for part in (
            _workload_families,
            _quota_family,
            _fleet_families,
            _health_families,
            _inference_families,
            _chargeback_families,
            _pipeline_families,
        ):
            try:
                result = part()
            except Exception:  # one broken part must not hide the others
                logger.exception("metrics: %s failed", part.__name__)
                errors += 1
                continue
            yield from result if isinstance(result, list) else [result]
        took = GaugeMetricFamily("gpuc_metrics_collect_seconds", "Time this scrape spent reading the database")
        took.add_metric([], time.perf_counter() - start)
        yield took
        failed = GaugeMetricFamily("gpuc_metrics_collect_errors", "Parts of this scrape that failed (see the logs)")
        failed.add_metric([], errors)
        yield failed


def registry() -> CollectorRegistry:
    out = CollectorRegistry(auto_describe=False)
    out.register(ConsoleCollector())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(out)
    else:
        from apps.core import metrics as process_metrics

        for metric in (
            process_metrics.REQUEST_SECONDS,
            process_metrics.TASK_SECONDS,
            process_metrics.TASK_LATENCY_SECONDS,
            process_metrics.BACKEND_CALL_SECONDS,
            process_metrics.BACKEND_CALL_ERRORS,
        ):
            out.register(_Forward(metric))
    return out


class _Forward:
    """Expose a metric of the default registry in ours, without registering it twice."""

    def __init__(self, metric):
        self.metric = metric

    def collect(self):
        return self.metric.collect()


def allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and constant_time_compare(header[7:], token):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in settings.METRICS_ALLOWED_NETWORKS)


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        return HttpResponse(
            "metrics: not allowed from this address; send Authorization: Bearer <METRICS_TOKEN>\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
