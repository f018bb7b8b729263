"""Admission benchmarks for issue 4: 100 tenants, 500 queues, 10,000 pending workloads.

    make bench   (with the others; or: DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_bench \
                                       .venv/bin/python bench/admission_bench.py)

Measures one admission decision (the pure engine on a loaded snapshot), building the snapshot from
PostgreSQL, and a full re-ordering pass over every pending claim (`run_admission_pass`: load,
order, decide, bulk-write), with SQL query counts. Baseline in the same run: the obvious
implementation that asks the database for each pending workload's queue usage (one aggregate
query per decision), on the first 500 pending claims, extrapolated per decision.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_bench")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.db.models import Sum  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

TENANTS, QUEUES, PENDING, ADMITTED = 100, 500, 10_000, 2_000
MODELS = ["h100", "a100"]


def setup() -> None:
    from apps.accounts.models import Tenant
    from apps.fleet.models import GpuModel
    from apps.tenancy.models import Admission, PriorityTier, Queue, Quota
    from bench.fleet_bench import ensure_database

    ensure_database()
    Admission.objects.all().delete()
    Quota.objects.all().delete()
    Queue.objects.all().delete()
    for tenant in Tenant.objects.filter(slug__startswith="bench-").order_by("-path"):
        tenant.delete()
    rng = random.Random(4)  # noqa: S311 - reproducible test data, not security
    orgs = [Tenant.objects.create(name=f"Org {i}", slug=f"bench-org-{i}") for i in range(10)]
    for org in orgs:
        org.path = f"/{org.pk}/"
        org.save(update_fields=["path"])
    teams = []
    for org in orgs:
        for j in range(TENANTS // 10 - 1):
            team = Tenant.objects.create(name=f"{org.name} team {j}", slug=f"{org.slug}-t{j}", parent=org)
            team.path = f"{org.path}{team.pk}/"
            team.save(update_fields=["path"])
            teams.append(team)
    tenants = orgs + teams  # 100
    queues = Queue.objects.bulk_create([Queue(tenant=tenants[i % len(tenants)], name=f"q{i}") for i in range(QUEUES)])
    models = {m.code: m for m in GpuModel.objects.filter(code__in=MODELS)}
    Quota.objects.bulk_create(
        [
            Quota(
                queue=q,
                gpu_model=models[code],
                guaranteed=rng.choice([0, 4, 8, 16, 32]),
                borrow_limit=rng.choice([None, 0, 8, 16]),
                lend_limit=None,
                weight=rng.choice([1.0, 2.0]),
            )
            for q in queues
            for code in MODELS
        ]
    )
    tiers = list(PriorityTier.objects.all())
    now = timezone.now()
    rows = []
    for i in range(ADMITTED + PENDING):
        admitted = i < ADMITTED
        rows.append(
            Admission(
                name=f"job-{i}",
                queue=queues[rng.randrange(QUEUES)],
                gpu_model=models[rng.choice(MODELS)],
                gpus=rng.choice([1, 2, 4, 8, 8, 16]),
                tier=rng.choice(tiers),
                user=f"u{rng.randrange(200)}",
                state="admitted" if admitted else "pending",
                submitted_at=now - timedelta(seconds=rng.randrange(86400)),
                admitted_at=now if admitted else None,
            )
        )
    Admission.objects.bulk_create(rows, batch_size=5000)


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def main() -> None:
    from apps.tenancy.admission import decide
    from apps.tenancy.models import Admission
    from apps.tenancy.services.admissions import run_admission_pass
    from apps.tenancy.snapshot import build_snapshot, pending_requests

    setup()
    print(f"admission benchmark: {TENANTS} tenants, {QUEUES} queues, {PENDING} pending, {ADMITTED} admitted claims")
    build = []
    for _ in range(5):
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as q:
            snapshot, tier_map = build_snapshot()
        build.append(time.perf_counter() - start)
    print(f"  build the snapshot from PostgreSQL      {median_ms(build):>9} ms   {len(q)} queries")
    pending = pending_requests(tier_map)
    samples = []
    for request in pending[:2000]:
        start = time.perf_counter()
        decide(snapshot, request)
        samples.append(time.perf_counter() - start)
    print(f"  one admission decision (median of 2000) {median_ms(samples):>9} ms")
    p99 = round(sorted(samples)[int(len(samples) * 0.99)] * 1000, 3)
    print(f"  one admission decision (p99)            {p99:>9} ms")

    # Baseline: a decision that queries the queue's usage (one aggregate per pending workload).
    base = []
    for _pk, queue_id, model_id in Admission.objects.filter(state="pending").values_list(
        "id", "queue_id", "gpu_model_id"
    )[:500]:
        start = time.perf_counter()
        Admission.objects.filter(state="admitted", queue_id=queue_id, gpu_model_id=model_id).aggregate(Sum("gpus"))
        base.append(time.perf_counter() - start)
    print(
        f"  baseline: one usage query per decision  {median_ms(base):>9} ms   (x {PENDING} pending = "
        f"{round(statistics.median(base) * PENDING, 1)} s for a pass, {PENDING} queries)"
    )

    passes = []
    for run in range(3):
        if run:  # undo the previous pass's admissions so each run does the same work
            Admission.objects.filter(state="admitted", admitted_at__isnull=False, name__gte=f"job-{ADMITTED}").update(
                state="pending", admitted_at=None, borrowed_from={}
            )
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as q:
            result = run_admission_pass()
        passes.append(time.perf_counter() - start)
    print(
        f"  full re-ordering pass (run_admission_pass) {median_ms(passes):>6} ms   {len(q)} queries, "
        f"{result['admitted']} admitted, {result['updated']} rows written"
    )


if __name__ == "__main__":
    main()
