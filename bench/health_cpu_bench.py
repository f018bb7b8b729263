"""CPU of one health cycle at 10,240 GPUs (issue 23 part 1), this checkout against another one, alternately.

    git worktree add --detach ../before main
    flock /tmp/bench.lock env DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> \
        .venv/bin/python bench/health_cpu_bench.py ../before

Each side runs in a process of its own, on a database of its own (<db>_before, <db>_after: the schemas may differ),
BENCH_ROUNDS (5) times, before and after alternately. A round: `run_cycle` (read the last state, the simulator's
exporter text, parse, rules, write) on a simulated 1,280 × 8 GPU cluster (h100 50 %, a100 30 %, l40s 20 %, seed 7;
synced once per database), BENCH_CYCLES (8) timed cycles after 2 untimed ones, 15 s apart as their `at` says, so a
minute turns every fourth cycle. Per cycle: the CPU seconds of this process (the console's side) and of its
PostgreSQL backend (/proc/<pg_backend_pid>/stat: the server must run on this machine). The simulator's rendering of
the exporter text is part of the console's figure (a real exporter renders on its own node); it is also measured
alone once per round before the cycles ("render", the same code on both sides: a control), and so is parsing those
1,280 texts ("parse": the series the rules read).

Behaviour check, first round of each side: ten scrapes of a 16-node cluster on a fixed clock with faults injected
between them (an exporter down across a minute's end, a hot GPU, XID 79 and XID 48: one cordon, one held by the
budget, a node down); the health rows (the minute's accumulator aside: its format is the change), rollups,
incidents, cordons and operations are compared between the two sides and must be equal.

Without an argument one side runs (this checkout) and prints its own figures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
CYCLES = int(os.environ.get("BENCH_CYCLES", "8"))
NODES = int(os.environ.get("BENCH_NODES", "1280"))
CLK = os.sysconf("SC_CLK_TCK")


# The side: one process in one checkout


def _setup(tree: Path) -> None:
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"  # what a cycle sends (a cordon's operation) runs here, as in tests
    import django

    django.setup()


def _backend_cpu() -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime, stime


def _cluster(name: str, nodes: int, seed: int):
    from apps.fleet.models import Cluster
    from apps.fleet.services import create_simulated_cluster, sync_inventory

    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        shape = {"nodes": nodes, "gpus_per_node": 8, "models": {"h100": 0.5, "a100": 0.3, "l40s": 0.2}, "seed": seed}
        cluster = create_simulated_cluster(None, name, shape)
        assert sync_inventory(cluster.pk).ok
    return cluster


def measure() -> dict:
    """CPU per cycle at NODES × 8 GPUs: [console, PostgreSQL, whether the minute turned] per timed cycle."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.backends.registry import get_backend
    from apps.fleet.models import Node
    from apps.health.ingest import run_cycle
    from apps.health.parsing import parse_exporter
    from apps.health.services.rulesets import compiled_rules

    cluster = _cluster(f"bench-cpu-{NODES}", NODES, 7)
    names = list(Node.objects.filter(cluster=cluster).values_list("name", flat=True))
    # First, in a fresh process on both sides: the simulator's rendering (the same code on both: a control) and the
    # parse of what it rendered.
    cpu = time.process_time()
    answers = get_backend(cluster).node_metrics(names)
    render = time.process_time() - cpu
    wanted = compiled_rules().metrics
    cpu = time.process_time()
    for answer in answers.values():
        parse_exporter(answer.body, wanted)
    parse = time.process_time() - cpu
    del answers
    at = timezone.now().replace(second=5, microsecond=0)
    cycles = []
    for step in range(CYCLES + 2):
        pg, cpu = _backend_cpu(), time.process_time()
        result = run_cycle(cluster.pk, at + timedelta(seconds=15 * step))
        cpu, pg = time.process_time() - cpu, _backend_cpu() - pg
        assert not result.skipped and result.nodes == NODES and not result.unreachable, result
        if step >= 2:
            cycles.append([cpu, pg, bool(result.rollups)])
    return {"cycles": cycles, "render": render, "parse": parse}


REPLAY_FAULTS = {  # scrape number: what happens before it
    2: [("inject", "gpu-0002", "exporter-down", None), ("inject", "gpu-0005", "nvlink", 3)],
    3: [("inject", "gpu-0003", "thermal", 1)],
    5: [("inject", "gpu-0004", "xid79", 2), ("inject", "gpu-0006", "xid48", 0)],
    6: [("clear", "gpu-0002", "exporter-down", None)],
    8: [("inject", "gpu-0001", "node-down", None)],
}


def replay() -> dict:
    """Ten scrapes with faults on a fixed clock; what they leave in the database, for comparison."""
    from datetime import UTC, datetime, timedelta
    from unittest import mock

    from django.utils import timezone

    from apps.backends.simulator.models import SimFault
    from apps.backends.simulator.services import clear_fault, inject_fault
    from apps.fleet.models import Cluster, Node
    from apps.fleet.services import create_simulated_cluster, sync_inventory
    from apps.health.ingest import run_cycle
    from apps.health.models import Incident, NodeHealth, NodeRollup
    from apps.operations.models import Operation

    clock = [datetime(2030, 1, 7, 9, 0, 5, tzinfo=UTC)]
    with mock.patch.object(timezone, "now", lambda: clock[0]):
        Cluster.objects.filter(name="bench-replay").delete()
        shape = {"nodes": 16, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 11, "nvlink_traffic": True}
        cluster = create_simulated_cluster(None, "bench-replay", shape)
        assert sync_inventory(cluster.pk).ok
        for scrape in range(10):
            for what, node, kind, gpu in REPLAY_FAULTS.get(scrape, []):
                if what == "inject":
                    inject_fault(None, cluster, node, kind, gpu, reason="bench")
                else:
                    clear_fault(None, SimFault.objects.get(sim__cluster=cluster, node=node, cleared_at__isnull=True))
            assert not run_cycle(cluster.pk).skipped
            clock[0] += timedelta(seconds=15)
    nodes = Node.objects.filter(cluster=cluster)
    health = {
        row.pop("node__name"): row
        for row in NodeHealth.objects.filter(node__in=nodes).values(
            "node__name", *(f.name for f in NodeHealth._meta.concrete_fields if f.name not in ("node", "acc"))
        )
    }
    incidents = [
        [
            *(i.node.name, i.cause, i.state, i.severity, i.action, i.rule_key, i.title, i.gpus, i.occurrences),
            *(i.waiting_for, i.detected_at, i.last_seen_at, i.clean_since, i.auto_isolated_at),
            [e.get("text") for e in i.evidence],
        ]
        for i in Incident.objects.filter(node__in=nodes).select_related("node").order_by("node__name", "cause")
    ]
    operations = list(
        Operation.objects.filter(target_type="fleet.node", target_id__in=[str(n.pk) for n in nodes])
        .order_by("kind", "target_label")
        .values_list("kind", "status", "target_label")
    )
    out = {
        "health": health,
        "rollups": sorted([r.node.name, r.minute, r.data] for r in NodeRollup.objects.filter(node__in=nodes)),
        "incidents": incidents,
        "cordoned": sorted(nodes.filter(unschedulable=True).values_list("name", flat=True)),
        "operations": operations,
    }
    return json.loads(json.dumps(out, default=str, sort_keys=True))


def side(tree: Path, with_replay: bool) -> dict:
    _setup(tree)
    from bench.fleet_bench import ensure_database

    ensure_database()
    out = measure()
    if with_replay:
        out["replay"] = replay()
    return out


# The driver: both sides, alternately


def run_side(tree: Path, database: str, with_replay: bool) -> dict:
    env = {**os.environ, "DATABASE_URL": database, "PYTHONHASHSEED": "0"}
    args = [sys.executable, str(Path(__file__).resolve()), "--side", str(tree), *(["--replay"] if with_replay else [])]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)  # noqa: S603 - our own script
    if done.returncode:
        sys.exit(f"{tree}: exit {done.returncode}\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(rounds: list[dict]) -> dict:
    cycles = [c for r in rounds for c in r["cycles"]]
    steady = [c for c in cycles if not c[2]]
    turned = [c for c in cycles if c[2]]

    def med(rows, i):
        return statistics.median(r[i] for r in rows) if rows else float("nan")

    return {
        "console": med(cycles, 0),
        "postgres": med(cycles, 1),
        "console steady": med(steady, 0),
        "postgres steady": med(steady, 1),
        "console minute turns": med(turned, 0),
        "postgres minute turns": med(turned, 1),
        "mean console": statistics.fmean(c[0] for c in cycles),
        "mean postgres": statistics.fmean(c[1] for c in cycles),
        "render": statistics.median(r["render"] for r in rounds),
        "parse": statistics.median(r["parse"] for r in rounds),
    }


def main() -> None:
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_health_cpu")
    sides = {"after": ROOT}
    if len(sys.argv) > 1:
        sides = {"before": Path(sys.argv[1]).resolve(), "after": ROOT}
    results: dict[str, list[dict]] = {name: [] for name in sides}
    for number in range(ROUNDS):
        for name, tree in sides.items():
            results[name].append(run_side(tree, f"{base}_{name}", with_replay=number == 0))
            print(f"round {number + 1} {name}: " + json.dumps(summary(results[name][-1:]), default=str), flush=True)
    print(f"\n{NODES} nodes x 8 GPUs, {ROUNDS} rounds x {CYCLES} cycles per side; CPU seconds per cycle, medians")
    sums = {name: summary(rounds) for name, rounds in results.items()}
    print(f"{'':<26}" + "".join(f"{name:>12}" for name in sums) + ("       ratio" if len(sums) == 2 else ""))
    for key in sums["after"]:
        values = [sums[name][key] for name in sums]
        ratio = f"{values[1] / values[0]:>12.2f}" if len(values) == 2 and values[0] else ""
        print(f"{key:<26}" + "".join(f"{v:>12.3f}" for v in values) + ratio)
    if len(sides) == 2:
        before, after = (results[name][0]["replay"] for name in ("before", "after"))
        for part in before:
            same = before[part] == after[part]
            print(f"behaviour, {part} ({len(after[part])} on the after side): {'same' if same else 'DIFFERENT'}")
            if not same:
                sys.exit(f"before: {json.dumps(before[part])[:2000]}\nafter: {json.dumps(after[part])[:2000]}")


if __name__ == "__main__":
    if "--side" in sys.argv:
        tree = Path(sys.argv[sys.argv.index("--side") + 1])
        print(json.dumps(side(tree, "--replay" in sys.argv), default=str))
    else:
        main()
