"""Fleet benchmarks for issue 3, at the sizes the issue names (1,280 nodes × 8 GPUs).

    make bench   (with the others; or: DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_bench \
                                       .venv/bin/python bench/fleet_bench.py)

Measures, on PostgreSQL:
  1. inventory sync of a simulated 1,280 × 8 fleet: first sync, unchanged resync, a resync where 10 % of the
     nodes changed, with the SQL query count of each; side by side with a naive per-row sync
     (update_or_create per node and GPU) as the baseline;
  2. the node list API: server time for one page (50 and 500 rows), and its query count;
  3. rendering one node's dcgm-exporter text, and parsing it back (our line parser vs prometheus_client's).
Each number is the median of several runs; the machine is noisy, so compare ratios within one run.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_bench")
os.environ.setdefault("ALLOWED_HOSTS", "testserver")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

NODES = int(os.environ.get("BENCH_NODES", "1280"))
GPUS = 8
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def ensure_database() -> None:
    import psycopg

    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"] or 5432,
        user=settings["USER"] or "postgres",
        dbname="postgres",
        autocommit=True,
    ) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [settings["NAME"]]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{settings["NAME"]}"')
    call_command("migrate", interactive=False, verbosity=0)


def fresh_cluster(name: str):
    from apps.fleet.models import Cluster
    from apps.fleet.services import create_simulated_cluster

    Cluster.objects.filter(name=name).delete()
    return create_simulated_cluster(
        None,
        name,
        {"nodes": NODES, "gpus_per_node": GPUS, "models": {"h100": 0.5, "a100": 0.3, "l40s": 0.2}, "seed": 7},
    )


def bench_sync() -> dict:
    from apps.backends.registry import get_backend
    from apps.fleet.services import sync_inventory

    out: dict[str, list] = {"inventory": [], "first": [], "unchanged": [], "changed10": [], "queries": {}}
    for run in range(REPEAT):
        cluster = fresh_cluster(f"bench-{run}")
        seconds, _ = timed(lambda c=cluster: get_backend(c).inventory())
        out["inventory"].append(seconds)
        with CaptureQueriesContext(connection) as q:
            seconds, result = timed(lambda c=cluster: sync_inventory(c.pk))
        assert result.ok and result.added == NODES, result
        out["first"].append(seconds)
        out["queries"]["first"] = len(q)
        with CaptureQueriesContext(connection) as q:
            seconds, result = timed(lambda c=cluster: sync_inventory(c.pk))
        assert result.unchanged == NODES, result
        out["unchanged"].append(seconds)
        out["queries"]["unchanged"] = len(q)
        # 10 % of nodes change: cordon them in the simulator, then resync.
        backend = get_backend(cluster)
        names = [f"gpu-{i:04d}" for i in range(1, NODES + 1, 10)]
        for name in names:
            backend.cordon(name, "bench")
        with CaptureQueriesContext(connection) as q:
            seconds, result = timed(lambda c=cluster: sync_inventory(c.pk))
        assert result.updated >= len(names), result
        out["changed10"].append(seconds)
        out["queries"]["changed10"] = len(q)
    return out


def bench_naive_sync() -> float:
    """Baseline: the obvious per-row ORM loop (update_or_create per node and per GPU), first sync only."""
    from apps.backends.registry import get_backend
    from apps.fleet.inventory import ModelResolver, fingerprint, gpu_fields, node_fields
    from apps.fleet.models import Gpu, GpuModel, Node

    cluster = fresh_cluster("bench-naive")
    inventory = get_backend(cluster).inventory()
    resolver = ModelResolver(GpuModel.objects.all())
    start = time.perf_counter()
    with transaction.atomic():
        for info in inventory.nodes:
            node, _ = Node.objects.update_or_create(
                cluster=cluster,
                name=info.name,
                defaults={**node_fields(info, resolver), "fingerprint": fingerprint(info)},
            )
            for gpu in info.gpus:
                fields = gpu_fields(gpu, resolver)
                Gpu.objects.update_or_create(node=node, index=fields.pop("index"), defaults=fields)
    return time.perf_counter() - start


def bench_node_api() -> dict:
    from django.test import Client

    from apps.accounts.models import User

    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_superuser": True})
    client = Client()
    client.force_login(admin)
    out = {}
    for size in (50, 500):
        url = f"/api/v1/nodes/?cluster=bench-0&page_size={size}&page=3"
        client.get(url)  # warm
        samples = []
        for _ in range(20):
            seconds, response = timed(lambda u=url: client.get(u))
            assert response.status_code == 200, response.content[:300]
            samples.append(seconds)
        with CaptureQueriesContext(connection) as q:
            client.get(url)
        out[size] = (median_ms(samples), len(q))
    filtered = "/api/v1/nodes/?cluster=bench-0&model=h100&has_free=true&page_size=50"
    samples = [timed(lambda: client.get(filtered))[0] for _ in range(20)]
    out["filtered"] = (median_ms(samples), None)
    return out


def bench_exporter() -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    from apps.backends.simulator.exporter import scrape
    from apps.fleet.exporter_text import parse

    answer = scrape("bench-0", "gpu-0001")
    assert answer.status == 200
    text = answer.body
    scrape_samples = [timed(lambda: scrape("bench-0", "gpu-0001"))[0] for _ in range(100)]
    from apps.backends.simulator import reports
    from apps.backends.simulator.engine import Engine
    from apps.fleet.models import Cluster

    with Engine.open(Cluster.objects.get(name="bench-0")) as engine:
        render = [timed(lambda: reports.node_metrics(engine, "gpu-0001"))[0] for _ in range(200)]
    ours = [timed(lambda: list(parse(text)))[0] for _ in range(200)]
    theirs = [
        timed(lambda: [s for f in text_string_to_metric_families(text) for s in f.samples])[0] for _ in range(200)
    ]
    return {
        "bytes": len(text),
        "lines": text.count("\n"),
        "scrape_ms": median_ms(scrape_samples),
        "render_ms": round(statistics.median(render) * 1000, 3),
        "parse_ours_ms": round(statistics.median(ours) * 1000, 3),
        "parse_prometheus_client_ms": round(statistics.median(theirs) * 1000, 3),
    }


def main() -> None:
    ensure_database()
    print(f"fleet benchmark: {NODES} nodes × {GPUS} GPUs, {REPEAT} runs, median times")
    sync = bench_sync()
    print(f"  backend inventory() alone      {median_ms(sync['inventory']):>8} ms")
    print(f"  first sync                     {median_ms(sync['first']):>8} ms   {sync['queries']['first']} queries")
    queries = sync["queries"]
    print(f"  unchanged resync               {median_ms(sync['unchanged']):>8} ms   {queries['unchanged']} queries")
    print(f"  resync, 10 % of nodes changed  {median_ms(sync['changed10']):>8} ms   {queries['changed10']} queries")
    if os.environ.get("BENCH_BASELINE", "1") == "1":
        naive = bench_naive_sync()
        print(
            f"  baseline: naive per-row sync   {round(naive * 1000, 1):>8} ms   "
            f"(bulk first sync is {naive / statistics.median(sync['first']):.1f}x faster)"
        )
    api = bench_node_api()
    for size in (50, 500):
        print(f"  node list API, page of {size:<4}    {api[size][0]:>8} ms   {api[size][1]} queries")
    print(f"  node list API, filtered page   {api['filtered'][0]:>8} ms")
    exporter = bench_exporter()
    print(
        f"  one node's exporter text       {exporter['scrape_ms']:>8} ms   ({exporter['bytes']} bytes, "
        f"{exporter['lines']} lines, incl. its DB reads)"
    )
    print(f"  render it from loaded state    {exporter['render_ms']:>8} ms")
    print(f"  parse it: our line parser      {exporter['parse_ours_ms']:>8} ms")
    print(f"  parse it: prometheus_client    {exporter['parse_prometheus_client_ms']:>8} ms")


if __name__ == "__main__":
    main()
