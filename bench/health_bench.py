"""GPU health benchmark (issue 8): one full ingestion and evaluation cycle for a 10,240-GPU fleet.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<your db> .venv/bin/python bench/health_bench.py

A simulated 1,280 × 8 fleet (h100 50 %, a100 30 %, l40s 20 %, seed 7) is created and synced. Every node's
dcgm-exporter text is rendered once (25 series per GPU, ~71 MB), then on exactly those bytes:

  baseline  prometheus_client's text parser alone (text_string_to_metric_families, every sample read);
  cycle     our whole cycle: parse (the series the rules and pages read) + evaluate every rule on every
            GPU + persist (bulk upsert of 1,280 health rows, rollups when the minute turns) + incidents.

Measured: the first cycle (rows inserted), a steady cycle (rows updated, rates against the previous
scrape), and a cycle in which the minute turns (1,280 rollup rows written). Medians of BENCH_REPEAT runs.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_health")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.fleet_bench import ensure_database, fresh_cluster  # noqa: E402

REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))


def median_s(samples: list[float]) -> float:
    return round(statistics.median(samples), 3)


def render_all(cluster) -> dict[str, str]:
    from apps.backends.simulator import reports
    from apps.backends.simulator.engine import Engine

    with Engine.open(cluster) as engine:
        return {spec.name: reports.node_metrics(engine, spec.name) for spec in engine.fleet}


def prometheus_parse(texts: dict[str, str]) -> int:
    from prometheus_client.parser import text_string_to_metric_families

    count = 0
    for text in texts.values():
        for family in text_string_to_metric_families(text):
            count += len(family.samples)
    return count


def bare_scan(texts: dict[str, str]) -> int:
    count = 0
    for text in texts.values():
        for line in text.split("\n"):
            if line and line[0] != "#":
                count += 1
    return count


def our_cycle(cluster, nodes, texts, compiled, at):
    from apps.health.ingest import ingest
    from apps.health.parsing import parse_exporter

    started = time.perf_counter()
    outcomes = {name: parse_exporter(texts[name], compiled.metrics) for _, name in nodes}
    parsed = time.perf_counter()
    result = ingest(cluster, nodes, outcomes, compiled, at)
    return parsed - started, time.perf_counter() - parsed, result


def main() -> None:
    from apps.fleet.models import Node
    from apps.fleet.services import sync_inventory
    from apps.health.models import Incident, NodeHealth, NodeRollup
    from apps.health.services.rulesets import compiled_rules

    ensure_database()
    cluster = fresh_cluster("bench-health")
    assert sync_inventory(cluster.pk).ok
    nodes = list(Node.objects.filter(cluster=cluster).values_list("id", "name"))
    texts = render_all(cluster)
    size_mb = sum(len(t) for t in texts.values()) / 1e6
    gpus = sum(1 for _ in Node.objects.filter(cluster=cluster)) * 8
    print(f"fleet: {len(nodes)} nodes, {gpus} GPUs; exporter text {size_mb:.1f} MB")
    compiled = compiled_rules()

    samples = prometheus_parse(texts)
    baseline = [time_of(lambda: prometheus_parse(texts)) for _ in range(REPEAT)]
    scan = [time_of(lambda: bare_scan(texts)) for _ in range(REPEAT)]
    print(f"samples: {samples}; wanted series: {len(compiled.metrics)}")

    first, steady, turn = [], [], []
    base = timezone.now().replace(second=5, microsecond=0)
    for run in range(REPEAT):
        NodeHealth.objects.filter(node__cluster=cluster).delete()
        NodeRollup.objects.filter(node__cluster=cluster).delete()
        Incident.objects.filter(node__cluster=cluster).delete()
        at = base + timedelta(minutes=10 * run)
        first.append(our_cycle(cluster, nodes, texts, compiled, at))
        with CaptureQueriesContext(connection) as queries:
            steady.append(our_cycle(cluster, nodes, texts, compiled, at + timedelta(seconds=15)))
        steady_queries = len(queries)
        turn.append(our_cycle(cluster, nodes, texts, compiled, at + timedelta(seconds=60)))
        assert turn[-1][2].rollups == len(nodes), turn[-1][2].rollups
    assert NodeHealth.objects.filter(node__cluster=cluster).count() == len(nodes)

    base_s = median_s(baseline)
    print()
    print(f"{'what':<62}{'median s':>10}{'× baseline':>12}")
    print(f"{'baseline: prometheus_client text parser alone':<62}{base_s:>10.3f}{1:>12.2f}")
    print(
        f"{'bare line scan of the same bytes (reference)':<62}{median_s(scan):>10.3f}{median_s(scan) / base_s:>12.2f}"
    )
    for label, runs in (
        ("first cycle (health rows inserted)", first),
        ("steady cycle (rows updated, rates vs previous scrape)", steady),
        ("cycle where the minute turns (+1,280 rollup rows)", turn),
    ):
        parse = median_s([r[0] for r in runs])
        rest = median_s([r[1] for r in runs])
        whole = median_s([r[0] + r[1] for r in runs])
        print(f"{'whole ' + label:<62}{whole:>10.3f}{whole / base_s:>12.2f}")
        print(f"{'  of which parse':<62}{parse:>10.3f}")
        print(f"{'  of which evaluate + persist + incidents':<62}{rest:>10.3f}")
    print(f"SQL statements in a steady cycle: {steady_queries}")
    print(f"findings in a steady cycle: {steady[-1][2].findings} (background PCIe replays etc.)")


def time_of(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
