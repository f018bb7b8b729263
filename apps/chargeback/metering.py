"""Metering: every backend's `usage_since` turned into priced-ready usage records, exactly once.

Per cluster, a watermark says how far (in the backend's clock) usage has been metered. A run reads
the watermark, asks the backend for usage since then (outside any transaction: a backend call may
take seconds), then in one transaction re-checks the watermark (another run may have won), inserts
the records and moves the watermark to the backend's clock at the call (or the latest end reported,
if later): the backend reports every allocation that overlapped [since, its now). The unique key (cluster, backend id,
GPU model, start) makes a replay of the same interval insert nothing. Records are split at UTC
midnights (so at period boundaries too) and at rate-card changes, mapped to console workloads by
`Workload.backend_name`, and given the exact GPU fraction their spec holds.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from fractions import Fraction

from django.db import transaction

from apps.backends.base import BackendError
from apps.backends.registry import get_backend
from apps.backends.types import UsageRecord as BackendUsage
from apps.chargeback.fractions import SECOND_PLACES, exact_seconds, held_gpus, to_decimal, worker_share
from apps.chargeback.models import MeterWatermark, Period, UsageRecord
from apps.chargeback.periods import period_for, split_points
from apps.chargeback.rates import RateBook
from apps.chargeback.rollup import add_to_rollup
from apps.chargeback.waste import assess_waste
from apps.fleet.inventory import ModelResolver
from apps.fleet.models import Cluster, GpuModel

logger = logging.getLogger(__name__)


@dataclass
class MeterResult:
    cluster: str
    ok: bool = True
    error: str = ""
    received: int = 0
    inserted: int = 0
    late: int = 0  # pieces that fell in a closed period and were not recorded
    metered_until: datetime | None = None
    skipped: bool = False  # another run moved the watermark first
    unattributed: int = 0
    late_pieces: list[str] = field(default_factory=list)


def meter_cluster(cluster_id: int) -> MeterResult:
    """Meter one cluster's usage since its watermark. Safe to run concurrently and to repeat."""
    cluster = Cluster.objects.get(pk=cluster_id)
    mark = MeterWatermark.objects.filter(cluster=cluster).first()
    called_at = backend_now(cluster)
    # First run: from the cluster's creation, or from its own clock if that is earlier (a replayed simulation).
    since = mark.metered_until if mark else min(cluster.created_at, called_at)
    try:
        usage = get_backend(cluster).usage_since(since)
    except BackendError as exc:
        logger.warning("metering %s failed: %s", cluster.name, exc)
        return MeterResult(cluster.name, ok=False, error=str(exc))
    result = MeterResult(cluster.name, received=len(usage))
    rows = build_records(cluster, usage, since)
    with transaction.atomic():
        if mark is None:
            mark, _created = MeterWatermark.objects.get_or_create(cluster=cluster, defaults={"metered_until": since})
        locked = MeterWatermark.objects.select_for_update().get(pk=mark.pk)
        if locked.metered_until != since:
            result.skipped = True
            return result
        periods = {p.pk: p for p in Period.objects.filter(pk__in={r.period_id for r in rows})}
        keep = []
        for row in rows:
            if periods[row.period_id].is_closed:
                result.late += 1
                result.late_pieces.append(f"{row.backend_id} {row.start.isoformat()}")
            else:
                keep.append(row)
        if result.late:
            logger.warning(
                "%s: %d usage pieces fell in closed periods and were not recorded", cluster.name, result.late
            )
        # A replay of an interval already metered finds its rows there (the unique key backs this up).
        known = set(
            UsageRecord.objects.filter(cluster=cluster, start__gte=since).values_list(
                "backend_id", "backend_model", "start"
            )
        )
        new = [r for r in keep if (r.backend_id, r.backend_model, r.start) not in known]
        UsageRecord.objects.bulk_create(new, batch_size=2000)
        add_to_rollup(new)
        result.inserted = len(new)
        result.unattributed = sum(1 for r in keep if r.tenant_id is None)
        # Everything before the call was reported; running work was reported up to the backend's now.
        locked.metered_until = max(since, called_at, *(u.end for u in usage))
        locked.save(update_fields=["metered_until", "updated_at"])
        result.metered_until = locked.metered_until
    return result


def merge_pieces(usage: list[BackendUsage]) -> list[BackendUsage]:
    """One record per workload, GPU model and span: a backend that reports per pod or per worker (Kubernetes)
    gives several records for one gang that started and runs together; their GPUs add up."""
    merged: dict[tuple, BackendUsage] = {}
    for record in usage:
        key = (record.backend_id, record.gpu_model, record.start, record.end)
        seen = merged.get(key)
        if seen is None:
            merged[key] = replace(record, placements=list(record.placements))
        else:
            seen.gpu_fraction += record.gpu_fraction
            seen.placements += record.placements
    return list(merged.values())


def backend_now(cluster: Cluster) -> datetime:
    """The cluster's clock, the one its usage is in (`Backend.now`: simulated time for a simulated cluster)."""
    return get_backend(cluster).now()


def meter_all_clusters() -> list[MeterResult]:
    return [meter_cluster(pk) for pk in Cluster.objects.order_by("pk").values_list("pk", flat=True)]


def build_records(cluster: Cluster, usage: list[BackendUsage], since: datetime) -> list[UsageRecord]:
    """Unsaved UsageRecord rows for the backend's records (pure apart from a few look-up queries)."""
    from apps.accounts.models import Tenant
    from apps.tenancy.models import Queue

    if not usage:
        return []
    usage = merge_pieces(usage)
    models = {m.pk: m for m in GpuModel.objects.all()}
    resolver = ModelResolver(models.values())
    workloads = console_workloads(cluster, {u.backend_id for u in usage})
    unmapped = [u for u in usage if u.backend_id not in workloads]
    tenants = dict(Tenant.objects.filter(slug__in={u.tenant for u in unmapped}).values_list("slug", "id"))
    queues = {
        (tenant_id, name): pk
        for pk, tenant_id, name in Queue.objects.filter(tenant_id__in=tenants.values()).values_list(
            "id", "tenant_id", "name"
        )
    }
    book = RateBook()
    cache: dict[datetime, Period] = {}
    rows: list[UsageRecord] = []
    for record in usage:
        start = max(record.start, since)
        if record.end <= start:
            continue
        workload = workloads.get(record.backend_id)
        model_id = resolver.resolve(record.gpu_model)
        if workload is not None:
            tenant_id, queue_id, tier_id = workload.tenant_id, workload.queue_id, workload.tier_id
            model_id = model_id or workload.gpu_model_id
            spec = workload.spec or {}
            share = _share(spec, models.get(model_id))
        else:
            tenant_id = tenants.get(record.tenant)
            queue_id = queues.get((tenant_id, record.queue))
            tier_id, share = None, Fraction(0)
        gpus = held_gpus(record.gpu_fraction, share)
        for piece_start, piece_end in split_points(start, record.end, book.change_times(model_id)):
            seconds = exact_seconds(piece_end - piece_start)
            card = book.card_for(model_id, tier_id, piece_start)
            rows.append(
                UsageRecord(
                    period=period_for(piece_start, cache),
                    cluster=cluster,
                    tenant_id=tenant_id,
                    queue_id=queue_id,
                    tier_id=tier_id,
                    gpu_model_id=model_id,
                    workload=workload,
                    rate_card=card,
                    backend_id=record.backend_id[:253],
                    backend_model=record.gpu_model[:100],
                    start=piece_start,
                    end=piece_end,
                    run_started_at=record.run_started_at,
                    gpus=to_decimal(gpus),
                    seconds=to_decimal(seconds, SECOND_PLACES),
                    gpu_seconds=to_decimal(gpus * seconds, SECOND_PLACES),
                )
            )
            rows[-1]._placements = record.placements  # for the waste assessment below; not stored
    assess_waste(cluster, rows)
    return rows


_RUN_NAME = re.compile(r"^wl(\d+)(?:r(\d+))?-")


def console_workloads(cluster: Cluster, backend_ids: set[str]) -> dict:
    """{backend id: Workload} for the ids that are runs of console workloads on `cluster`.

    A requeued workload runs again under a new backend name (wl<id>r<n>-<name>), and usage of an
    earlier run can be metered after the workload moved on: the id and run are read from the name,
    and the name is checked against the workload's naming rule.
    """
    from apps.workloads.models import Workload

    runs = {}
    for backend_id in backend_ids:
        match = _RUN_NAME.match(backend_id)
        if match:
            runs[backend_id] = (int(match.group(1)), int(match.group(2) or 0))
    if not runs:
        return {}
    found = {
        w.pk: w
        for w in Workload.objects.filter(cluster=cluster, pk__in={pk for pk, _ in runs.values()}).only(
            "id",
            "name",
            "backend_name",
            "tenant_id",
            "queue_id",
            "tier_id",
            "gpu_model_id",
            "spec",
            "state",
            "state_reason",
            "requeues",
            "finished_at",
        )
    }
    out = {}
    for backend_id, (pk, attempt) in runs.items():
        workload = found.get(pk)
        if workload is not None and workload.run_name(attempt) == backend_id:  # the naming rule itself
            out[backend_id] = workload
    return out


def _share(spec: dict, model: GpuModel | None) -> Fraction:
    """One worker's share of a GPU under the workload's spec; 0 when it cannot be told (keep the backend's figure)."""
    if model is None:
        return Fraction(0)
    if spec.get("kind") == "inference":
        return Fraction(0)  # whole GPUs per pod: the backend's figure is already exact
    try:
        return worker_share(spec.get("sharing"), spec.get("gpus_per_worker", 1), model)
    except ValueError:
        return Fraction(0)
