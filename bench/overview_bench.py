"""Overview page benchmark: the home page ("/") at 1,024 and 10,240 GPUs in four clusters, 102,400 in ten.

    make bench   (or: DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_ov_bench \
                      .venv/bin/python bench/overview_bench.py)

For each fleet size (`BENCH_SIZES`, nodes:clusters with 8 GPUs a node: 128:4, 1280:4 and 12800:10; seeding the
largest takes about 8 minutes) the fleet is rebuilt from scratch: that many simulated clusters (h100 50 %,
a100 30 %, l40s 20 %) filled to about 70 % with gangs of whole
nodes and small jobs through the simulator, synced; every node's dcgm-exporter text rendered and
ingested once (the health rows the heatmap reads); a few XID 79 / ECC / NVLink / thermal faults and
dead exporters, so incidents open and automation cordons within the isolation budget; then synced
again. The tenants are the same at both sizes: 100 tenants (10 organizations × 10 teams), 500 queues
with quota, one admitted claim per simulated workload plus pending demand, and the month's spend so
far as the per-day usage rollup (every queue, two tiers, its models, each day of the month to today),
with a monthly budget per organization.

Timed: `GET /` through Django's test client (the server's time: middleware, views, templates; no
network), as a platform admin and as a tenant member, `BENCH_REPEAT` runs each (30) after one warm-up,
interleaved with the other pages (each round requests every page once, so load from other work on the
machine hits them alike), with the SQL statement count: with `OVERVIEW_CACHE_S=0` (every view computes
every panel) and with the default 15 s (the heatmap and every tenant's spend shared between views).
Baselines in the same run: a page with the console's shell only (`/accounts/profile/`) and the fleet
health page (`/health/`), which reads the same fleet; and the heatmap alone, from the cells the health cycles
store and grouped at each view, against the obvious way to build it (load every node's health row and walk its
readings in Python; `BENCH_PAGES_ONLY=1` skips these). Before timing, every cluster's heatmap cells are stored as
its next health cycle would (the clusters were ingested while the fleet grew).
`BENCH_REUSE=1` with one size times the fleet already seeded in the database (to time two checkouts alternately).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_ov_bench")
os.environ.setdefault("ALLOWED_HOSTS", "testserver")
# Automatic isolation runs as Celery tasks: run them in process, so faults end in cordoned nodes.
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.fleet_bench import ensure_database  # noqa: E402

# Fleet sizes as nodes:clusters (8 GPUs a node): 1,024 and 10,240 GPUs in four clusters, 102,400 in ten.
SIZES = [
    tuple(int(x) for x in (size.split(":") if ":" in size else (size, "4")))
    for size in os.environ.get("BENCH_SIZES", "128:4,1280:4,12800:10").split(",")
]
REPEAT = int(os.environ.get("BENCH_REPEAT", "30"))
# BENCH_REUSE=1: with a single size, time the fleet and tenants already in the database if they match it
# (seeded by an earlier run), so that two checkouts can be timed alternately on the same data.
REUSE = os.environ.get("BENCH_REUSE") == "1"
GPUS = 8
ORGS, TEAMS, QUEUES = 10, 9, 500
MODELS = {"h100": 0.5, "a100": 0.3, "l40s": 0.2}
PRICES = {"h100": Decimal("2.90"), "a100": Decimal("1.60"), "l40s": Decimal("0.90")}
FILL = 0.7  # share of the fleet's GPUs the seeded work asks for
PENDING_SHARE = 0.15  # pending demand, as a share of the fleet
FAULTS = ("xid79", "xid48", "row-remap-failure", "nvlink", "thermal", "exporter-down")
PREFIX = "ov-"


def rng_for(*parts) -> random.Random:
    return random.Random("/".join(map(str, parts)))  # noqa: S311 - reproducible test data, not secrets


# Tenants, queues, quota, spend: the same at every fleet size.


def seed_tenants():
    from apps.accounts.models import Membership, Tenant, User
    from apps.chargeback.models import SpendBudget, UsageDay
    from apps.fleet.models import GpuModel
    from apps.tenancy.models import Admission, Queue, Quota

    UsageDay.objects.all().delete()  # rows of an earlier run protect its queues and tenants
    SpendBudget.objects.all().delete()
    Admission.objects.all().delete()
    Quota.objects.all().delete()
    Queue.objects.all().delete()
    Membership.objects.filter(user__username__startswith=PREFIX).delete()
    User.objects.filter(username__startswith=PREFIX).delete()
    for tenant in Tenant.objects.filter(slug__startswith=PREFIX).order_by("-path"):
        tenant.delete()
    orgs = []
    for i in range(ORGS):
        org = Tenant.objects.create(name=f"Org {i}", slug=f"{PREFIX}org-{i}")
        org.path = f"/{org.pk}/"
        org.save(update_fields=["path"])
        orgs.append(org)
    teams = []
    for org in orgs:
        for j in range(TEAMS):
            team = Tenant.objects.create(name=f"{org.name} team {j}", slug=f"{org.slug}-t{j}", parent=org)
            team.path = f"{org.path}{team.pk}/"
            team.save(update_fields=["path"])
            teams.append(team)
    queues = Queue.objects.bulk_create([Queue(tenant=teams[i % len(teams)], name=f"q{i}") for i in range(QUEUES)])
    models = {m.code: m for m in GpuModel.objects.filter(code__in=MODELS)}
    rng = rng_for("quota")
    Quota.objects.bulk_create(
        [
            Quota(queue=q, gpu_model=models[code], guaranteed=rng.choice([0, 4, 8, 16, 32]), weight=1.0)
            for q in queues
            for code in MODELS
        ]
    )
    admin = User.objects.create(username=f"{PREFIX}admin", is_superuser=True, is_staff=True)
    Membership.objects.create(user=admin, tenant=None, role="platform-admin")
    member = User.objects.create(username=f"{PREFIX}member")
    Membership.objects.create(user=member, tenant=teams[0], role="member")
    return admin, member, orgs, teams, queues, models


def seed_spend(orgs, queues, models, clusters) -> int:
    from apps.chargeback.models import RateCard, SpendBudget, UsageDay
    from apps.chargeback.periods import current_period
    from apps.tenancy.models import PriorityTier

    UsageDay.objects.all().delete()
    SpendBudget.objects.all().delete()
    period = current_period()
    cards = {}
    for code, model in models.items():
        card = RateCard.objects.filter(gpu_model=model, tier=None).first()
        if card is None:
            card = RateCard.objects.create(
                gpu_model=model, tier=None, rate=PRICES[code], currency="USD", effective_from=period.start
            )
        cards[code] = card
    tiers = list(PriorityTier.objects.filter(name__in=["training", "exploratory"]))
    now = timezone.now()
    days = [(period.start + timedelta(days=d)).date() for d in range((now - period.start).days + 1)]
    rng = rng_for("spend")
    rows = []
    for i, queue in enumerate(queues):
        for code in rng.sample(list(MODELS), 2):
            for tier in tiers:
                for day in days:
                    seconds = Decimal(rng.randrange(1, 64) * 3600)
                    idle = (seconds * Decimal(rng.randrange(0, 40)) / 100).quantize(Decimal("0.000001"))
                    rows.append(
                        UsageDay(
                            period=period,
                            day=day,
                            cluster=clusters[i % len(clusters)],
                            tenant_id=queue.tenant_id,
                            queue=queue,
                            tier=tier,
                            gpu_model=models[code],
                            rate_card=cards[code],
                            gpu_seconds=seconds,
                            idle_gpu_seconds=idle,
                            used_gpu_seconds=seconds - idle,
                            records=rng.randrange(1, 40),
                        )
                    )
    UsageDay.objects.bulk_create(rows, batch_size=5000)
    SpendBudget.objects.bulk_create(
        [
            SpendBudget(tenant=org, monthly_amount=Decimal(rng.choice([150_000, 250_000, 400_000])), currency="USD")
            for org in orgs
        ]
    )
    return len(rows)


# The fleet: rebuilt at each size.


def seed_fleet(nodes: int, clusters_n: int, teams, queues, models) -> dict:
    from apps.backends.simulator import reports
    from apps.backends.simulator.engine import Engine
    from apps.backends.types import Topology, WorkloadSpec
    from apps.chargeback.models import UsageDay
    from apps.fleet.models import Cluster, Node
    from apps.fleet.services import create_simulated_cluster, sync_inventory
    from apps.health.ingest import ingest
    from apps.health.models import Incident
    from apps.health.parsing import parse_exporter
    from apps.health.services.rulesets import compiled_rules
    from apps.tenancy.models import Admission, PriorityTier

    UsageDay.objects.all().delete()  # it protects the clusters; spend is seeded again afterwards
    Admission.objects.all().delete()
    Incident.objects.all().delete()
    Cluster.objects.all().delete()
    compiled = compiled_rules()
    tier = PriorityTier.objects.get(name="training")
    per_cluster = nodes // clusters_n
    clusters, claims, faults = [], [], 0
    slug_of = {t.pk: t.slug for t in teams}
    at = timezone.now()
    for c in range(clusters_n):
        shape = {"nodes": per_cluster, "gpus_per_node": GPUS, "models": MODELS, "seed": 11 + c}
        cluster = create_simulated_cluster(None, f"{PREFIX}{c}", shape)
        clusters.append(cluster)
        rng = rng_for("work", nodes, c)
        with Engine.open(cluster) as engine:
            by_model: dict[str, int] = {}
            for spec in engine.fleet:
                by_model[spec.model] = by_model.get(spec.model, 0) + GPUS
            for code, total in by_model.items():
                asked, n = 0, 0
                while asked < total * FILL:
                    queue = queues[rng.randrange(len(queues))]
                    if rng.random() < 0.35:
                        workers, per, topology = rng.choice([1, 2, 2, 4]), GPUS, Topology.LEAF
                    else:
                        workers, per, topology = 1, rng.choice([1, 1, 2, 4]), Topology.ANY
                    name = f"c{c}-{code}-{n}"
                    n += 1
                    result = engine.submit(
                        WorkloadSpec(
                            name=name,
                            tenant=slug_of[queue.tenant_id],
                            queue=queue.name,
                            gpu_model=code,
                            workers=workers,
                            gpus_per_worker=per,
                            topology=topology,
                            duration_s=7 * 86400,
                        )
                    )
                    asked += workers * per
                    claims.append((name, queue, models[code], workers * per, result.state == "running"))
            for i in range(max(2, per_cluster // 40)):
                node = engine.fleet[rng.randrange(len(engine.fleet))].name
                kind = FAULTS[i % len(FAULTS)]
                engine.inject(node, kind, None if kind == "exporter-down" else rng.randrange(GPUS), "bench")
                faults += 1
        assert sync_inventory(cluster.pk).ok
        node_rows = list(Node.objects.filter(cluster=cluster).values_list("id", "name"))
        with Engine.open(cluster) as engine:
            texts = {spec.name: reports.node_metrics(engine, spec.name) for spec in engine.fleet}
            down = {f.node for f in engine.active_faults() if f.kind == "exporter-down"}
        outcomes = {}
        for name, text in texts.items():
            if name in down:
                continue
            outcomes[name] = parse_exporter(text, compiled.metrics)
        ingest(cluster, node_rows, outcomes, compiled, at)
        assert sync_inventory(cluster.pk).ok  # cordons done by automatic isolation
    rng = rng_for("pending", nodes)
    pending = []
    for i in range(int(nodes * GPUS * PENDING_SHARE / 6)):
        queue = queues[rng.randrange(len(queues))]
        code = rng.choice(list(MODELS))
        pending.append((f"pending-{i}", queue, models[code], rng.choice([1, 2, 4, 8, 8, 16]), False))
    Admission.objects.bulk_create(
        [
            Admission(
                name=name,
                queue=queue,
                gpu_model=model,
                gpus=gpus,
                tier=tier,
                state="admitted" if running else "pending",
                submitted_at=at - timedelta(minutes=rng.randrange(600)),
                admitted_at=at if running else None,
            )
            for name, queue, model, gpus, running in claims + pending
        ],
        batch_size=5000,
    )
    return {
        "clusters": clusters,
        "workloads": len(claims),
        "pending": sum(1 for c in claims + pending if not c[4]),
        "faults": faults,
        "incidents": Incident.objects.count(),
    }


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def p95_ms(samples: list[float]) -> float:
    return round(sorted(samples)[max(0, int(len(samples) * 0.95) - 1)] * 1000, 1)


def time_pages(variants: list[tuple[str, object, str, int]]) -> list[tuple[str, float, float, int, int]]:
    """Time each (label, user, url, OVERVIEW_CACHE_S) `REPEAT` times, interleaved: each round requests every
    variant once, so a busy neighbour on the shared machine slows them alike. Returns (label, median ms,
    p95 ms, SQL statements, bytes) per variant."""
    from django.test import Client, override_settings

    clients = []
    for _label, user, url, cache_s in variants:
        client = Client()
        client.force_login(user)
        with override_settings(OVERVIEW_CACHE_S=cache_s):
            assert client.get(url).status_code == 200, url  # warm-up: template loading, the cache when on
        clients.append(client)
    samples: list[list[float]] = [[] for _ in variants]
    for _ in range(REPEAT):
        for i, (client, (_label, _user, url, cache_s)) in enumerate(zip(clients, variants, strict=True)):
            with override_settings(OVERVIEW_CACHE_S=cache_s):
                started = time.perf_counter()
                response = client.get(url)
                samples[i].append(time.perf_counter() - started)
            assert response.status_code == 200
    out = []
    for i, (client, (label, _user, url, cache_s)) in enumerate(zip(clients, variants, strict=True)):
        with override_settings(OVERVIEW_CACHE_S=cache_s), CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        out.append((label, median_ms(samples[i]), p95_ms(samples[i]), len(queries), len(response.content)))
    return out


def naive_heatmap() -> dict:
    """Baseline for the heatmap: every node's health row loaded, its readings walked in Python (no grouping)."""
    from apps.health.models import NodeHealth

    cells: dict[tuple[str, str, str], float] = {}
    rows = NodeHealth.objects.values_list("node__cluster__name", "node__name", "exporter_up", "gpus")
    for cluster, node, up, gpus in rows:
        for index, gpu in (gpus or {}).items():
            value = gpu.get("v", {}).get("DCGM_FI_DEV_GPU_UTIL")
            if up and value is not None:
                cells[(cluster, node, index)] = value
    return cells


def store_heatmaps() -> None:
    """Every cluster's heatmap cells as its next health cycle stores them (`apps/health/heatmap.py`): each cluster
    was ingested while the fleet was still growing (cells grouped for fewer nodes), or the fleet was reused."""
    from apps.fleet.models import Cluster
    from apps.health.heatmap import store_heatmap

    for cluster_id in Cluster.objects.values_list("id", flat=True):
        store_heatmap(cluster_id)


def time_functions(nodes: int) -> list[tuple[str, float, float, int]]:
    """The heatmap alone: from the cells the health cycles stored, grouped in SQL at each view, and the naive
    baseline, interleaved."""
    from apps.dashboard.overview import utilization_heatmap
    from apps.fleet.capacity import capacity_by_model
    from apps.fleet.models import Node

    node_sets: dict = {}
    capacity_by_model(Node.objects.all(), node_sets=node_sets)  # counted by the overview's capacity statement
    variants = [
        (
            "heatmap alone: the stored cells (utilization_heatmap)",
            lambda: utilization_heatmap(Node.objects.all(), nodes, node_sets),
        ),
        ("heatmap alone: grouped in SQL at each view", lambda: utilization_heatmap(Node.objects.all(), nodes)),
        ("baseline: heatmap from every node's readings loaded into Python", naive_heatmap),
    ]
    samples: list[list[float]] = [[] for _ in variants]
    counts = []
    for _label, fn in variants:
        with CaptureQueriesContext(connection) as queries:
            fn()
        counts.append(len(queries))
    for _ in range(REPEAT):
        for i, (_label, fn) in enumerate(variants):
            started = time.perf_counter()
            fn()
            samples[i].append(time.perf_counter() - started)
    return [(label, median_ms(samples[i]), p95_ms(samples[i]), counts[i]) for i, (label, _fn) in enumerate(variants)]


def reusable(nodes: int, clusters_n: int):
    """The admin and member users if the database holds this size's fleet and tenants (BENCH_REUSE=1)."""
    from apps.accounts.models import User
    from apps.chargeback.models import UsageDay
    from apps.fleet.models import Cluster, Node

    if not (REUSE and len(SIZES) == 1):
        return None
    users = {u.username: u for u in User.objects.filter(username__in=[f"{PREFIX}admin", f"{PREFIX}member"])}
    if len(users) < 2 or Node.objects.count() != nodes or Cluster.objects.count() != clusters_n:
        return None
    if not UsageDay.objects.exists():
        return None
    return users[f"{PREFIX}admin"], users[f"{PREFIX}member"]


def main() -> None:
    from apps.fleet.models import Cluster, Gpu, Node
    from apps.health.models import Incident, NodeHealth

    ensure_database()
    reuse = reusable(*SIZES[0])
    if reuse:
        admin, member = reuse
        print("reusing the seeded fleet and tenants (BENCH_REUSE=1)")
    else:
        admin, member, orgs, teams, queues, models = seed_tenants()
    results = []
    for nodes, clusters_n in SIZES:
        started = time.perf_counter()
        if not reuse:
            fleet = seed_fleet(nodes, clusters_n, teams, queues, models)
            usage_rows = seed_spend(orgs, queues, models, fleet["clusters"])
        else:
            from apps.chargeback.models import UsageDay
            from apps.tenancy.models import Admission

            fleet = {
                "workloads": Admission.objects.filter(state="admitted").count(),
                "pending": Admission.objects.filter(state="pending").count(),
                "faults": "?",
            }
            usage_rows = UsageDay.objects.count()
        gpus = Gpu.objects.count()
        print(
            f"fleet: {Node.objects.count()} nodes, {gpus} GPUs in {Cluster.objects.count()} clusters, "
            f"{Node.objects.filter(gpu_allocated__gt=0).count()} nodes busy, {NodeHealth.objects.count()} health rows, "
            f"{fleet['workloads']} workloads, {fleet['pending']} pending claims, {fleet['faults']} faults, "
            f"{Incident.objects.open().count()} open incidents, {Node.objects.filter(unschedulable=True).count()} "
            f"cordoned, {usage_rows} usage-day rows (seeded in {time.perf_counter() - started:.0f} s)"
        )
        store_heatmaps()
        with connection.cursor() as cursor:
            # As autovacuum would have by now: no dead rows of the previous fleet, and the planner's statistics.
            cursor.execute("VACUUM ANALYZE")
        variants = [
            ("GET / (overview), platform admin, every view computed", admin, "/", 0),
            ("GET / (overview), tenant member, every view computed", member, "/", 0),
            ("GET / (overview), platform admin, shared figures cached 15 s", admin, "/", 15),
            ("baseline: GET /accounts/profile/ (the shell only)", admin, "/accounts/profile/", 0),
            ("comparison: GET /health/ (fleet health)", admin, "/health/", 0),
        ]
        for label, median, p95, queries, size in time_pages(variants):
            results.append((gpus, label, median, p95, queries, size))
            print(f"  {gpus:>6} GPUs  {label:<62} median {median:>7} ms  p95 {p95:>7} ms  {queries:>3} queries")
        for label, median, p95, queries in time_functions(nodes) if not os.environ.get("BENCH_PAGES_ONLY") else []:
            results.append((gpus, label, median, p95, queries, 0))
            print(f"  {gpus:>6} GPUs  {label:<62} median {median:>7} ms  p95 {p95:>7} ms  {queries:>3} queries")
    print()
    print("| GPUs | what | median | p95 | SQL queries | page size |")
    print("|---:|---|---:|---:|---:|---:|")
    for gpus, label, median, p95, queries, size in results:
        page = f"{size // 1024} kB" if size else ""
        print(f"| {gpus:,} | {label} | {median} ms | {p95} ms | {queries} | {page} |")


if __name__ == "__main__":
    main()
