"""Inference telemetry benchmarks for issue 11: one scrape cycle over 100 simulated services.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<your bench db> .venv/bin/python bench/inference_bench.py

Measures the simulator's engine text (warm per-process state, and cold: a service 30 simulated days old
in a fresh process), parsing one service's text, and a whole `scrape_services()` cycle (claim, fetch
from the simulator in-process, parse, per-series deltas, bulk writes, SLO windows) with its SQL query
count. Baselines in the same run: `prometheus_client`'s bare parse of the same text (the floor our parse
adds to), and the fetches of the cycle alone (what the cycle costs before any of our processing).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"  # submissions reach the simulator inline

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

SERVICES = int(os.environ.get("BENCH_SERVICES", "100"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "7"))


def median_ms(fn, repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def engine_text() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from apps.backends.simulator import serving
    from apps.backends.simulator.serving import ServiceProfile, render_service_metrics
    from apps.inference.parsing import parse_engine_metrics

    start = datetime(2025, 5, 1, tzinfo=UTC)
    profile = ServiceProfile("wl1-chat", "vllm", "meta-llama/Llama-3.1-8B-Instruct", 7, start, replicas=4)
    now = start + timedelta(days=30)
    render_service_metrics(profile, now)
    warm = median_ms(lambda: render_service_metrics(profile, now), 50)

    def cold():
        serving._cache.clear()
        render_service_metrics(profile, now)

    text = render_service_metrics(profile, now).text
    print(f"engine text: 4 replicas, {len(text) / 1024:.1f} kB, {text.count(chr(10))} lines")
    print(f"  render, warm per-process state      {warm:8.3f} ms")
    print(f"  render, cold (30 simulated days)    {median_ms(cold, 3):8.1f} ms")
    print(f"  parse_engine_metrics                {median_ms(lambda: parse_engine_metrics(text, 'vllm'), 50):8.3f} ms")
    bare = median_ms(lambda: list(text_string_to_metric_families(text)), 50)
    print(f"  baseline: prometheus_client bare    {bare:8.3f} ms")


def cycle() -> None:
    from apps.accounts.models import Tenant
    from apps.accounts.services import bootstrap_platform_admin
    from apps.fleet.models import Cluster, GpuModel
    from apps.fleet.services import create_simulated_cluster, sync_inventory
    from apps.inference.scrape import scrape_services
    from apps.inference.sources import fetch_in_process
    from apps.tenancy import services as tenancy
    from apps.workloads.models import Workload
    from apps.workloads.services import reconcile_workloads, submit_workload
    from bench.fleet_bench import ensure_database

    ensure_database()
    Workload.objects.filter(cluster__name="bench-infer").delete()
    Cluster.objects.filter(name="bench-infer").delete()
    from django.db import transaction

    with transaction.atomic():
        admin = bootstrap_platform_admin(username="bench-admin", password="bench-only-password")
    nodes = -(-SERVICES // 8)
    cluster = create_simulated_cluster(
        None, "bench-infer", {"nodes": nodes, "gpus_per_node": 8, "models": {"h100": 1}, "seed": 3}
    )
    sync_inventory(cluster.pk)
    tenant = Tenant.objects.filter(slug="bench-serve").first() or tenancy.create_tenant(
        admin, name="Bench serve", slug="bench-serve"
    )
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=tenant, gpu_model=h100, guaranteed=nodes * 8)
    queue = tenancy.create_queue(admin, tenant=tenant, name=f"serve-{int(time.time())}")
    tenancy.bind_queue(admin, queue, cluster=cluster, namespaces=["bench-serve"])
    tenancy.set_quota(admin, queue=queue, gpu_model=h100, guaranteed=nodes * 8)
    for i in range(SERVICES):
        engine = "vllm" if i % 2 else "sglang"
        spec = {
            "name": f"svc-{i}",
            "tenant": tenant.slug,
            "queue": queue.name,
            "engine": engine,
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu_model": "h100",
        }
        if engine == "sglang":
            spec["autoscaling"] = {"enabled": True, "min_replicas": 1, "max_replicas": 4, "waiting_threshold": 5}
        submit_workload(admin, kind="inference", spec=spec)
    reconcile_workloads()
    running = list(Workload.objects.filter(cluster=cluster, state="running").select_related("cluster"))
    print(f"scrape cycle: {len(running)} running services on {nodes} nodes")
    base = timezone.now() - timedelta(hours=1)
    scrape_services(base)  # baselines every service's totals
    times, queries = [], []
    for i in range(1, REPEAT + 1):
        with CaptureQueriesContext(connection) as captured:
            start = time.perf_counter()
            counts = scrape_services(base + timedelta(seconds=15 * i))
            times.append((time.perf_counter() - start) * 1000)
        assert counts["ok"] == len(running), counts
        queries.append(len(captured))
    cycle_ms, cycle_queries = statistics.median(times), statistics.median(queries)
    print(f"  scrape_services(), whole cycle      {cycle_ms:8.1f} ms  ({cycle_queries:.0f} queries)")
    fetch = median_ms(lambda: [fetch_in_process(w.cluster, w.backend_name) for w in running])
    print(f"  baseline: the cycle's fetches alone {fetch:8.1f} ms")


if __name__ == "__main__":
    engine_text()
    cycle()
