"""Demo history for the wait-time analytics: a day of finished workloads with realistic queueing.

The demo cluster starts empty, so nothing it runs has waited yet. This writes the last 24 hours of
finished work for the demo queues directly (history, not actions: no backend, no audit), with
waits that grow in the busy afternoon hours and differ by queue, so the percentile charts and the
/metrics wait histogram have something to show from the first page view.
"""

from __future__ import annotations

import random
from datetime import timedelta

from django.utils import timezone

PREFIX = "hist-"
# (tenant slug, queue, GPU model, tier, GPUs, typical wait in seconds, jobs per hour)
HISTORY = [
    ("acme-llm", "train", "h100", "training", 16, 600, 3),
    ("acme-llm", "serve", "h100", "online-inference", 8, 20, 1),
    ("acme-vision", "train", "a100", "training", 8, 240, 2),
    ("lab-rl", "default", "l40s", "exploratory", 1, 60, 4),
]


def seed_wait_history(cluster, hours: int = 24, history=HISTORY) -> int:
    """Idempotent: does nothing once history exists. Returns the rows written."""
    from apps.fleet.models import GpuModel
    from apps.tenancy.models import PriorityTier, Queue
    from apps.workloads.models import Workload, WorkloadState

    if Workload.objects.filter(name__startswith=PREFIX).exists():
        return 0
    rng = random.Random(7)  # noqa: S311 - demo data, not secrets: the same history on every fresh demo
    now = timezone.now().replace(second=0, microsecond=0)
    models = {m.code: m for m in GpuModel.objects.all()}
    tiers = {t.name: t for t in PriorityTier.objects.all()}
    rows = []
    for slug, queue_name, code, tier, gpus, typical, per_hour in history:
        queue = Queue.objects.select_related("tenant").filter(tenant__slug=slug, name=queue_name).first()
        if queue is None:
            continue
        for hour in range(hours, 0, -1):
            busy = 3.0 if 13 <= (now - timedelta(hours=hour)).hour <= 18 else 1.0
            for n in range(per_hour):
                created = now - timedelta(hours=hour, minutes=rng.randrange(60))
                wait = timedelta(seconds=rng.expovariate(1 / (typical * busy)))
                started = min(created + wait, now - timedelta(minutes=1))  # history: never in the future
                rows.append(
                    Workload(
                        kind="inference" if tier == "online-inference" else "training",
                        name=f"{PREFIX}{queue_name}-{hour}-{n}",
                        tenant=queue.tenant,
                        queue=queue,
                        tier=tiers[tier],
                        cluster=cluster,
                        gpu_model=models[code],
                        gpus=gpus,
                        spec={"history": True},
                        state=WorkloadState.SUCCEEDED,
                        state_reason="demo history",
                        backend_name=f"{PREFIX}{slug}-{queue_name}-{hour}-{n}"[:63],
                        created_at=created,
                        started_at=started,
                        finished_at=min(started + timedelta(minutes=rng.randrange(10, 90)), now),
                    )
                )
    submitted = [row.created_at for row in rows]
    Workload.objects.bulk_create(rows)  # auto_now_add stamps "now" on created_at: put the history's times back
    for row, created in zip(rows, submitted, strict=True):
        row.created_at = created
    Workload.objects.bulk_update(rows, ["created_at"], batch_size=500)
    return len(rows)
