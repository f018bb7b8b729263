"""Admission benchmarks for issues 4 and 19: 100 tenants, 500 queues, 10,000 pending workloads.

    make bench   (with the others; or: DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_bench \
                                       .venv/bin/python bench/admission_bench.py)

Measures one admission decision (the pure engine on a loaded snapshot), building the snapshot from
PostgreSQL, and a full re-ordering pass over every pending claim (`run_admission_pass`: load,
order, decide, bulk-write), with SQL query counts. Baseline in the same run: the obvious
implementation that asks the database for each pending workload's queue usage (one aggregate
query per decision), on the first 500 pending claims, extrapolated per decision.

Issue 19: the fleet is two clusters of 640 nodes x 8 GPUs (H100 and A100 half each); each queue is bound to one
or both; claims are on one of their queue's clusters with a runtime limit of 1-24 h (one in ten without); the
pass runs alternately with reservations (the head of each waiting queue gets its expected start, backfill
rules apply) and without (strict order behind a waiting head), `BENCH_PASSES` times each (default 3).
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
CLUSTERS, NODES, GPUS = ["bench-a", "bench-b"], 640, 8
PASSES = int(os.environ.get("BENCH_PASSES", "3"))


def setup() -> None:
    from apps.accounts.models import Tenant
    from apps.fleet.models import Cluster, GpuModel, Node, NodeState
    from apps.tenancy.models import Admission, PriorityTier, Queue, QueueBinding, Quota
    from bench.fleet_bench import ensure_database

    ensure_database()
    Admission.objects.all().delete()
    Quota.objects.all().delete()
    QueueBinding.objects.all().delete()
    Queue.objects.all().delete()
    Cluster.objects.filter(name__in=CLUSTERS).delete()
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
    clusters = [Cluster.objects.create(name=name, kind="simulated") for name in CLUSTERS]
    Node.objects.bulk_create(
        [
            Node(
                cluster=cluster,
                name=f"n{i:04d}",
                gpu_model=models[MODELS[i % 2]],
                state=NodeState.READY,
                gpu_count=GPUS,
                gpu_allocatable=GPUS,
                gpu_allocated=rng.choice([0, 0, 4, 8]),
            )
            for cluster in clusters
            for i in range(NODES)
        ],
        batch_size=2000,
    )
    bound = {}
    for q in queues:
        bound[q.pk] = rng.choice([[clusters[0]], [clusters[1]], clusters])
        QueueBinding.objects.bulk_create(
            [QueueBinding(queue=q, cluster=c, namespaces=[f"ns-{q.pk}"]) for c in bound[q.pk]]
        )
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
        queue = queues[rng.randrange(QUEUES)]
        runtime = rng.choice([None, *range(3600, 86400, 3600)]) if rng.random() < 0.9 else None
        admitted_at = now - timedelta(seconds=rng.randrange(3600)) if admitted else None
        rows.append(
            Admission(
                name=f"job-{i}",
                queue=queue,
                gpu_model=models[rng.choice(MODELS)],
                gpus=rng.choice([1, 2, 4, 8, 8, 16]),
                tier=rng.choice(tiers),
                user=f"u{rng.randrange(200)}",
                state="admitted" if admitted else "pending",
                submitted_at=now - timedelta(seconds=rng.randrange(86400)),
                admitted_at=admitted_at,
                cluster=rng.choice(bound[queue.pk]),
                max_runtime_s=runtime,
                ends_at=admitted_at + timedelta(seconds=runtime) if admitted and runtime else None,
            )
        )
    Admission.objects.bulk_create(rows, batch_size=5000)


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def reset() -> None:
    """Undo a pass's admissions: what it admitted is pending again (reasons and reservations stay as it left them,
    so that the next pass of the same mode writes what a pass in the steady state writes)."""
    from apps.tenancy.models import Admission

    Admission.objects.filter(state="admitted", admitted_at__isnull=False, name__gte=f"job-{ADMITTED}").update(
        state="pending", admitted_at=None, ends_at=None, borrowed_from={}
    )


def timed_pass(reserve: bool) -> tuple[float, int, dict, int]:
    """One pass of the mode after an untimed one (which brings reasons and reservations to that mode's state)."""
    from apps.tenancy.models import Admission
    from apps.tenancy.services.admissions import run_admission_pass

    reset()
    run_admission_pass(reserve=reserve)
    reset()
    start = time.perf_counter()
    with CaptureQueriesContext(connection) as q:
        result = run_admission_pass(reserve=reserve)
    elapsed = time.perf_counter() - start
    return elapsed, len(q), result, Admission.objects.filter(state="pending", reserved_units__gt=0).count()


def main() -> None:
    from apps.tenancy.admission import admission_pass, decide
    from apps.tenancy.models import Admission
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
    snapshot.now = timezone.now()
    samples = []
    for request in pending[:2000]:
        start = time.perf_counter()
        decide(snapshot, request)
        samples.append(time.perf_counter() - start)
    print(f"  one admission decision (median of 2000) {median_ms(samples):>9} ms")
    p99 = round(sorted(samples)[int(len(samples) * 0.99)] * 1000, 3)
    print(f"  one admission decision (p99)            {p99:>9} ms")
    # The same decisions with a pass's reservations in place (every waiting queue's head holds one).
    held, _ = build_snapshot()
    admission_pass(held, pending_requests(tier_map), timezone.now())
    holding = len(held.cluster_reservations)
    print(f"  reservations a pass makes               {len(held.reservations):>9}   ({holding} hold a cluster)")
    samples = []
    for request in pending[:2000]:
        start = time.perf_counter()
        decide(held, request)
        samples.append(time.perf_counter() - start)
    print(f"  one decision among them (median of 2000) {median_ms(samples):>8} ms")
    p99 = round(sorted(samples)[int(len(samples) * 0.99)] * 1000, 3)
    print(f"  one decision among them (p99)           {p99:>9} ms")

    # Baseline: a decision that queries the queue's usage (one aggregate per pending workload).
    base = []
    for _pk, queue_id, model_id in Admission.objects.filter(state="pending").values_list(
        "id", "queue_id", "gpu_model_id"
    )[:500]:
        start = time.perf_counter()
        Admission.objects.filter(state="admitted", queue_id=queue_id, gpu_model_id=model_id).aggregate(Sum("gpu_units"))
        base.append(time.perf_counter() - start)
    print(
        f"  baseline: one usage query per decision  {median_ms(base):>9} ms   (x {PENDING} pending = "
        f"{round(statistics.median(base) * PENDING, 1)} s for a pass, {PENDING} queries)"
    )

    passes: dict[bool, list[float]] = {True: [], False: []}
    last: dict[bool, tuple] = {}
    for run in range(PASSES):
        for reserve in (False, True) if run % 2 == 0 else (True, False):  # alternate, so drift hits both alike
            elapsed, queries, result, reserved = timed_pass(reserve)
            passes[reserve].append(elapsed)
            last[reserve] = (queries, result, reserved)
    for reserve, label in ((False, "without reservations"), (True, "with reservations   ")):
        queries, result, reserved = last[reserve]
        runs = ", ".join(str(median_ms([t])) for t in passes[reserve])
        print(
            f"  full pass {label} {median_ms(passes[reserve]):>9} ms   ({runs}) {queries} queries, "
            f"{result['admitted']} admitted, {result['updated']} rows written, {reserved} reservations"
        )
    ratio = statistics.median(passes[True]) / statistics.median(passes[False])
    print(f"  with / without reservations            {ratio:>9.2f}")


if __name__ == "__main__":
    main()
