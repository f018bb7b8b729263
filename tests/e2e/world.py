"""The outside world of the browser journeys: what a real deployment's clusters, telemetry and beat would do.

The journeys drive the console only through its pages (and, for CI, its API over curl); everything here
stands in for what happens around them: a simulated cluster that exists, a team's queue bound to it,
simulated time passing, the periodic tasks that meter usage, keep workloads moving and scrape DCGM.
Each helper calls the same service or task body beat would run, in the test's thread, while the live
server answers the browser.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Tenant
from apps.backends.simulator.services import advance_time
from apps.backends.types import UsageRecord as BackendUsage
from apps.chargeback import services as chargeback
from apps.chargeback.metering import build_records, meter_cluster
from apps.chargeback.models import MeterWatermark, UsageRecord
from apps.chargeback.periods import month_start, next_month
from apps.chargeback.rollup import add_to_rollup
from apps.fleet.models import Cluster, GpuModel
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.health.ingest import run_cycle
from apps.health.models import NodeHealth
from apps.tenancy import services as tenancy
from apps.tenancy.models import Queue
from apps.workloads import services as workloads
from tests.utils.personas import Personas, fresh

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)
H100_RATE = "2.50"


@dataclass
class World:
    cluster: Cluster
    queue: Queue
    h100: GpuModel


def h100_cluster(name: str, *, nodes: int, seed: int) -> Cluster:
    """A simulated cluster of `nodes` × 8 H100, its inventory synced (beat syncs every minute)."""
    cluster = create_simulated_cluster(
        None, name, {"nodes": nodes, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": seed}
    )
    sync(cluster)
    return cluster


def team_with_quota(
    personas: Personas, cluster: Cluster, *, tenant: Tenant | None = None, guaranteed: int = 8
) -> World:
    """`tenant` (Org A) may use `guaranteed` H100 of the cluster through its queue `train`; H100 costs 2.50 an hour."""
    admin = fresh(personas.platform_admin)
    tenant = tenant or personas.a
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=tenant, gpu_model=h100, guaranteed=24)
    queue = tenancy.create_queue(admin, tenant=tenant, name="train")
    tenancy.bind_queue(admin, queue, cluster=cluster, namespaces=[f"{tenant.slug}-train"])
    tenancy.set_quota(admin, queue=queue, gpu_model=h100, guaranteed=guaranteed)
    chargeback.set_rate(admin, gpu_model=h100, rate=H100_RATE, effective_from=LONG_AGO)
    return World(cluster=cluster, queue=queue, h100=h100)


def training_spec(name: str, *, workers: int = 1, gpus: int = 8, runtime_s: int = 1800, tenant: str = "a") -> dict:
    return {
        "name": name,
        "tenant": tenant,
        "queue": "train",
        "tier": "training",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["python", "train.py"],
        "workers": workers,
        "gpus_per_worker": gpus,
        "gpu_model": "h100",
        "max_runtime_s": runtime_s,
    }


def sync(cluster: Cluster) -> None:
    """An inventory sync of the cluster (beat: every minute): nodes, GPUs and what runs on them."""
    assert sync_inventory(cluster.pk).ok


def time_passes(cluster: Cluster, minutes: float) -> None:
    """Simulated minutes pass on the cluster; then beat's periodic work runs once: metering, then the
    workloads loop (admission, outbox, reconcile), so a finished workload is seen with its usage metered."""
    advance_time(None, cluster, minutes)
    assert meter_cluster(cluster.pk).ok
    workloads.tick()


def scrape(cluster: Cluster) -> None:
    """One DCGM scrape of the cluster (beat: every 15 s) with its rules, incidents and automatic isolation."""
    result = run_cycle(cluster.pk)
    assert not result.skipped, result


def scrape_a_minute_of_history(cluster: Cluster) -> None:
    """Two scrapes a minute apart (in the rollups' eyes), so that the nodes' sparklines have points."""
    scrape(cluster)
    health = NodeHealth.objects.filter(node__cluster=cluster)
    first = health.first()
    health.update(
        acc_minute=first.acc_minute - timedelta(minutes=1), scraped_at=first.scraped_at - timedelta(seconds=15)
    )
    scrape(cluster)


def last_month_metered(personas: Personas, cluster: Cluster) -> datetime:
    """Last month's H100 usage of Org A (2 GPUs) and its team (8 GPUs), 6 hours every other day, metered to the
    month's end: what a month of metering would have written. Returns the month's start."""
    admin = fresh(personas.platform_admin)
    tenancy.create_queue(admin, tenant=personas.a_team, name="train")
    start = month_start(month_start(timezone.now()) - timedelta(days=1))
    usage = [
        BackendUsage(
            f"{slug}-{day}",
            slug,
            "train",
            "h100",
            gpus,
            start + timedelta(days=day),
            start + timedelta(days=day, hours=6),
        )
        for day in range(0, 28, 2)
        for slug, gpus in (("a", 2), ("a-team", 8))
    ]
    rows = build_records(cluster, usage, start)
    with transaction.atomic():
        UsageRecord.objects.bulk_create(rows)
        add_to_rollup(rows)
    MeterWatermark.objects.update_or_create(cluster=cluster, defaults={"metered_until": next_month(start)})
    return start
