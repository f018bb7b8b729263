"""Demo chargeback: rate cards, spend budgets, last month's spend replayed on a simulated cluster, and its close.

A second simulated cluster ("sim-history") starts its clock at the start of last month. Work is
submitted to it day by day (training on H100 and A100, MIG evaluations, time-sliced and tiny HAMi
notebooks that sit idle, evaluations sharing L40S GPUs through MPS), the clock advances a day at a time
and the usage is metered through the same `usage_since` path as any cluster. Mid-month a node is drained
for a GPU fault and the evicted runs are credited. Once the month is metered to its end, the period is
closed: its statements (and their CSV) are on the Statements page, the charts on the Chargeback page.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

HISTORY_CLUSTER = "sim-history"
HISTORY_SHAPE = {"nodes": 16, "gpus_per_node": 8, "models": {"h100": 0.5, "a100": 0.25, "l40s": 0.25}, "seed": 11}
RATES = [("h100", None, "2.50"), ("a100", None, "1.40"), ("l40s", None, "0.90"), ("h100", "exploratory", "1.60")]
SPEND_BUDGETS = [("acme", "60000.00", False), ("lab", "9000.00", True)]
# (tenant, queue, GPU model, workers, GPUs per worker, sharing, fraction, MIG profile, hours, per day)
DAILY_WORK = [
    ("acme-llm", "train", "h100", 2, 8, "whole", 1.0, "", 10, 2),
    ("acme-llm", "serve", "h100", 1, 8, "whole", 1.0, "", 24, 1),
    ("acme-vision", "train", "a100", 1, 8, "whole", 1.0, "", 6, 2),
    ("acme-vision", "train", "a100", 3, 1, "mig", 1 / 7, "1g.10gb", 4, 2),
    ("lab-rl", "default", "l40s", 2, 1, "time-slice", 0.25, "", 8, 3),
    ("lab-rl", "default", "l40s", 4, 1, "mps", 0.25, "", 3, 2),  # policy evaluations as MPS clients
    ("lab-rl", "default", "h100", 1, 1, "hami", 0.01, "", 20, 3),  # notebooks left open: idle waste
    ("lab-rl", "default", "a100", 1, 4, "whole", 1.0, "", 5, 1),
]


def seed_chargeback(admin) -> None:
    """Idempotent: does nothing once the history cluster exists."""
    from apps.accounts.models import Tenant
    from apps.backends.registry import get_backend
    from apps.chargeback import services
    from apps.chargeback.metering import meter_cluster
    from apps.chargeback.models import Period, RateCard, SpendBudget
    from apps.chargeback.periods import month_start, next_month
    from apps.fleet.models import Cluster, GpuModel
    from apps.fleet.services import create_simulated_cluster, sync_inventory
    from apps.tenancy.models import PriorityTier

    if Cluster.objects.filter(name=HISTORY_CLUSTER).exists():
        return
    models = {m.code: m for m in GpuModel.objects.all()}
    if not RateCard.objects.exists():
        for code, tier, rate in RATES:
            services.set_rate(
                admin,
                gpu_model=models[code],
                tier=PriorityTier.objects.get(name=tier) if tier else None,
                rate=rate,
                effective_from=datetime(2020, 1, 1, tzinfo=UTC),
                note="demo list price",
            )
    for slug, amount, block in SPEND_BUDGETS:
        tenant = Tenant.objects.get(slug=slug)
        if not SpendBudget.objects.filter(tenant=tenant).exists():
            services.set_spend_budget(admin, tenant=tenant, monthly_amount=amount, block_preemptible_when_over=block)
    start = month_start(month_start(timezone.now()) - timedelta(days=1))
    cluster = create_simulated_cluster(
        admin, HISTORY_CLUSTER, HISTORY_SHAPE, description="Last month's demo usage, replayed for chargeback."
    )
    # A replay: the cluster's clock starts at the start of last month (the simulator only moves it forward after).
    get_backend(cluster).simulation().replay_from(start, booted_at=start - timedelta(days=1))
    sync_inventory(cluster.pk)
    meter_cluster(cluster.pk)  # the watermark starts at the replay's first instant
    _replay_month(admin, cluster, next_month(start))
    period = Period.objects.get(start=start)
    if not period.is_closed:
        services.close_period(admin, period, reason="demo: last month's statements")


def _replay_month(admin, cluster, end: datetime) -> None:
    from apps.backends.registry import get_backend
    from apps.backends.types import Sharing, WorkloadSpec
    from apps.chargeback import services
    from apps.chargeback.metering import backend_now, meter_cluster

    backend = get_backend(cluster)
    day = 0
    while backend_now(cluster) < end:
        for index, (tenant, queue, model, workers, per_worker, sharing, fraction, profile, hours, count) in enumerate(
            DAILY_WORK
        ):
            for copy in range(count):
                backend.submit(
                    WorkloadSpec(
                        name=f"{tenant}-d{day}-{index}-{copy}",
                        tenant=tenant,
                        queue=queue,
                        gpu_model=model,
                        workers=workers,
                        gpus_per_worker=per_worker,
                        sharing=Sharing(sharing),
                        gpu_fraction=fraction,
                        mig_profile=profile,
                        duration_s=int(hours * 3600 * (0.6 + 0.1 * ((day + copy) % 7))),
                        labels={"sim/outcome": "succeed"},
                    )
                )
        if day == 11:  # a GPU falls off the bus: the node is drained and its runs are credited
            backend.advance(5 * 3600)
            node = backend.simulation().busy_node("h100")
            if node:
                result = backend.drain(node, "XID 79: GPU fell off the bus")
                meter_cluster(cluster.pk)
                services.credit_drain(
                    admin,
                    cluster,
                    result,
                    reason=f"XID 79 on {node}: node drained",
                    incident_ref="DEMO-INC-1",
                )
                backend.resume(node)
            backend.advance(19 * 3600)
        else:
            backend.advance(24 * 3600)
        meter_cluster(cluster.pk)
        day += 1
    from apps.chargeback.credits import settle_credits

    settle_credits()
