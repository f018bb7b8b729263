"""XID to cordon, the console's own part (issue 23 part 2): from the moment a health cycle's scrape has finished
to the moment the node is cordoned, measured on its own at 10,240 GPUs.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> CELERY_BROKER_URL=redis://127.0.0.1:6379/<n> \
        .venv/bin/python bench/cordon_bench.py

A simulated 1,280 × 8 H100 fleet (seed 3) is synced and scraped once. Then BENCH_REPEAT (8) times: XID 79 is
injected on a random node's GPU, the cycle's steps run as `run_cycle` runs them (collect the telemetry, then
`ingest`: rules on every GPU, incidents, isolation, persist), and the time is taken from the end of the collection
("scrape finished") to the cordon operation's `finished_at` (the backend cordoned the node and the node row says
so). Split into: scrape finished → incident opened (the rules over the whole fleet), incident → operation started,
operation run (the backend call). Side by side in the same run: the floor, the simulator backend's bare `cordon()`
of a node (what any path must pay), and the whole cycle.

The cordon goes through the operation, as in production; the operation's Celery message is sent to the broker as
well (no worker runs here: it would find the operation done) and the queues are purged at the end.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_health")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/10")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.fleet_bench import ensure_database  # noqa: E402

NODES = int(os.environ.get("BENCH_NODES", "1280"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "8"))


def main() -> None:
    from apps.backends.registry import get_backend
    from apps.backends.simulator.services import inject_fault
    from apps.fleet.models import Cluster, Node
    from apps.fleet.services import create_simulated_cluster, sync_inventory
    from apps.health.ingest import collect, default_source, ingest, load_state
    from apps.health.models import Incident, IsolationPolicy
    from apps.health.services.rulesets import compiled_rules
    from apps.operations.models import Operation
    from console.celery import app

    assert settings.HEALTH_CORDON_INLINE, "this measures the cycle's own cordon (HEALTH_CORDON_INLINE=1)"
    ensure_database()
    Cluster.objects.all().delete()
    cluster = create_simulated_cluster(
        None, "bench-cordon", {"nodes": NODES, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 3}
    )
    assert sync_inventory(cluster.pk).ok
    IsolationPolicy.objects.all().delete()
    IsolationPolicy.objects.create(
        pool=None, cordon_severities=["critical", "fatal"], max_nodes_per_hour=1000, max_percent_per_hour=100
    )
    source = default_source(cluster)
    compiled = compiled_rules()
    nodes = list(Node.objects.filter(cluster=cluster).values_list("id", "name"))
    names = [name for _, name in nodes]

    def cycle():
        started = time.perf_counter()
        state = load_state(cluster, [pk for pk, _ in nodes])  # before the scrape, as run_cycle reads it
        outcomes = collect(source, cluster, names, compiled.metrics)
        scraped_wall = timezone.now()
        scraped = time.perf_counter()
        ingest(cluster, nodes, outcomes, compiled, timezone.now(), state)
        return scraped_wall, scraped - started, time.perf_counter() - scraped

    cycle()  # the health rows exist: what follows are steady cycles
    time.sleep(1)
    cycle()
    rng = random.Random(23)  # noqa: S311 - a reproducible choice of nodes, not a secret
    total, to_incident, to_operation, operation_run, scrape_s, ingest_s = [], [], [], [], [], []
    node_ids = dict((name, pk) for pk, name in nodes)
    for name in rng.sample(names, REPEAT):
        inject_fault(None, cluster, name, "xid79", rng.randrange(8), reason="cordon benchmark")
        scraped_at, scrape, rest = cycle()
        assert Node.objects.get(cluster=cluster, name=name).unschedulable, f"{name} was not cordoned in the cycle"
        operation = Operation.objects.get(kind="health.cordon", params__node_id=node_ids[name])
        incident = Incident.objects.get(node__cluster=cluster, node__name=name, cause="xid-79")
        total.append((operation.finished_at - scraped_at).total_seconds())
        opened = incident.events.order_by("time", "pk").first().time  # the incident's first event: it opened
        to_incident.append((opened - scraped_at).total_seconds())
        to_operation.append((operation.started_at - opened).total_seconds())
        operation_run.append((operation.finished_at - operation.started_at).total_seconds())
        scrape_s.append(scrape)
        ingest_s.append(rest)
        print(f"  {name}: scrape finished → cordoned {total[-1]:.3f} s (incident after {to_incident[-1]:.3f} s)")
        time.sleep(1)

    backend = get_backend(cluster)
    spare = [n for n in names if not Node.objects.get(cluster=cluster, name=n).unschedulable][: max(5, REPEAT)]
    bare = []
    for name in spare:
        started = time.perf_counter()
        backend.cordon(name, "bench: bare cordon")
        bare.append(time.perf_counter() - started)
        backend.uncordon(name) if hasattr(backend, "uncordon") else None
    with app.connection_for_write() as conn:
        for queue in settings.CELERY_QUEUE_NAMES:
            conn.default_channel.queue_purge(queue)

    def line(label, values):
        print(f"{label:<58}{statistics.median(values):>10.3f}{max(values):>10.3f}")

    print(f"\nfleet {NODES} nodes × 8 GPUs = {NODES * 8:,} GPUs; {REPEAT} faults; seconds")
    print(f"{'':<58}{'median':>10}{'max':>10}")
    line("scrape finished → cordon applied", total)
    line("  of which scrape finished → incident opened (rules)", to_incident)
    line("  of which incident → operation started", to_operation)
    line("  of which the operation (backend cordon + node row)", operation_run)
    line("floor: the backend's bare cordon() of a node", bare)
    line("the cycle before the scrape finished (last rows, read + parse)", scrape_s)
    line("the cycle after the scrape (rules, incidents, persist)", ingest_s)
    line("the whole cycle", [a + b for a, b in zip(scrape_s, ingest_s, strict=True)])
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; nproc {os.cpu_count()}")


if __name__ == "__main__":
    main()
