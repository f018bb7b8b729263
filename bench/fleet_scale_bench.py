"""Fleet-scale benchmark (issue 23 part 1): ten simulated clusters on two Celery workers, every periodic task of a
deployment running, for a few minutes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_fleet_scale CELERY_BROKER_URL=redis://127.0.0.1:6379/<n> \
        .venv/bin/python bench/fleet_scale_bench.py

Size: BENCH_CLUSTERS (10) × BENCH_NODES (1,280) nodes × 8 GPUs = 102,400 GPUs; 100 tenants, 500 queues with quota,
the simulated clusters 70 % busy with running work, and BENCH_PENDING (10,000) pending claims (the overview
benchmark's seeding, bench/overview_bench.py). The database is the benchmark's own: it is emptied. BENCH_REUSE=1 times
the fleet an earlier run seeded there, if it is this size.

Then, as a deployment runs it (docs/configuration.md, "Celery queues and workers"): `celery beat` with the console's
schedule (health every HEALTH_SCRAPE_INTERVAL_S, inventory and metering every 60 s, the workloads tick, ...), two
`celery worker`s (prefork, CELERY_WORKER_CONCURRENCY processes each, every queue), and gunicorn (2 workers) answering
a client that reads the overview, capacity and node list APIs every 2 s. For BENCH_SECONDS (300) every task's
duration and queue wait are logged (bench/fleet_scale_app.py); the workers' CPU and every process's peak RSS are read
from /proc.

Each run starts from settled tables (what earlier runs left dead vacuumed away) and with PostgreSQL's autovacuum on,
as in a deployment: a server that has it off (CI's configuration) gets it on for the window and back after
(BENCH_AUTOVACUUM=0 leaves the server as it is).

Side by side, in the same run before the workers start: one cluster's health cycle, inventory sync and metering run
alone in this process (BENCH_REPEAT times, median), the floor each task's duration under load is compared with.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_fleet_scale")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/11")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

CLUSTERS = int(os.environ.get("BENCH_CLUSTERS", "10"))
NODES = int(os.environ.get("BENCH_NODES", "1280"))
PENDING = int(os.environ.get("BENCH_PENDING", "10000"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "300"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
WORKERS = 2
WORKER_NAMES = tuple(f"w{i}" for i in range(1, WORKERS + 1))
PORT = int(os.environ.get("BENCH_PORT", "8123"))
LOGS = ROOT / "var" / "bench"
TASK_LOG = LOGS / "fleet-scale-tasks.jsonl"
CLK = os.sysconf("SC_CLK_TCK")
INTERVALS = {
    "ingest_cluster_task": settings.HEALTH_SCRAPE_INTERVAL_S,
    "sync_cluster_task": 60,
    "meter_cluster_task": 60,
}


# /proc: process trees, CPU seconds, peak RSS


def tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            pass
    return found


def cpu_seconds(pid: int) -> float:
    total = 0.0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK  # utime, stime
        except FileNotFoundError:
            pass
    return total


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (every core, every process: /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / CLK


def postgres_seconds() -> float:
    """CPU seconds of the PostgreSQL server: the postmaster, its live backends, and the backends it has reaped
    (cutime/cstime). Every database on it counts: the machine must be otherwise quiet."""
    try:
        with open("/var/run/postgresql/15-main.pid") as f:
            postmaster = int(f.readline())
    except (FileNotFoundError, ValueError):
        return 0.0
    total = cpu_seconds(postmaster)
    with open(f"/proc/{postmaster}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return total + (int(fields[13]) + int(fields[14])) / CLK


def peak_rss_mb(pid: int) -> list[float]:
    """VmHWM (peak resident set) of each process of the tree, MB."""
    peaks = []
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peaks.append(int(line.split()[1]) / 1024)
        except FileNotFoundError:
            pass
    return peaks


# Seeding


def seed() -> tuple[list, str]:
    import bench.overview_bench as ov
    from apps.accounts import services as accounts
    from apps.accounts.models import User
    from apps.chargeback.models import UsageRecord
    from apps.health.models import IsolationPolicy
    from bench.fleet_bench import ensure_database
    from console.celery import app

    ensure_database()
    reused = _reusable()
    if reused is not None:
        return reused
    UsageRecord.objects.all().delete()  # an earlier run's metering protects its queues and clusters
    app.conf.task_always_eager = True  # automatic isolation while seeding runs here, not later in the workers
    try:
        admin, _member, orgs, teams, queues, models = ov.seed_tenants()
        ov.PENDING_SHARE = PENDING * 6 / (CLUSTERS * NODES * ov.GPUS)  # seed_fleet asks for nodes·8·share/6 claims
        IsolationPolicy.objects.all().delete()
        fleet = ov.seed_fleet(CLUSTERS * NODES, CLUSTERS, teams, queues, models)
    finally:
        app.conf.task_always_eager = False
    admin = User.objects.get(pk=admin.pk)
    _, token = accounts.issue_token(admin, user=admin, name="bench-web", tenant=None, role="platform-admin")
    print(
        f"seeded: {CLUSTERS} clusters × {NODES} nodes × 8 GPUs = {CLUSTERS * NODES * 8:,} GPUs; "
        f"{len(teams) + len(orgs)} tenants, {len(queues)} queues; {fleet['workloads']:,} running workloads, "
        f"{fleet['pending']:,} pending claims, {fleet['incidents']} incidents"
    )
    return fleet["clusters"], token


def _reusable() -> tuple[list, str] | None:
    """BENCH_REUSE=1: the fleet an earlier run seeded, if the database holds this size (seeding 102,400 GPUs takes
    minutes). What an earlier run's workers left is reset: cycle leases of a killed worker, queued messages."""
    import bench.overview_bench as ov
    from apps.accounts import services as accounts
    from apps.accounts.models import User
    from apps.fleet.models import Cluster, Node
    from apps.health.models import TelemetrySource

    if os.environ.get("BENCH_REUSE") != "1":
        return None
    admin = User.objects.filter(username=f"{ov.PREFIX}admin").first()
    if admin is None or Cluster.objects.count() != CLUSTERS or Node.objects.count() != CLUSTERS * NODES:
        print("BENCH_REUSE=1 but the database does not hold this size: seeding")
        return None
    TelemetrySource.objects.update(cycle_started_at=None)
    _, token = accounts.issue_token(admin, user=admin, name="bench-web", tenant=None, role="platform-admin")
    print(f"reusing the seeded fleet: {CLUSTERS} clusters × {NODES} nodes × 8 GPUs (BENCH_REUSE=1)")
    return list(Cluster.objects.order_by("name")), token


def floors(cluster) -> dict[str, float]:
    """One cluster's periodic work alone in this process: the floor of each task's duration under load."""
    from apps.chargeback.metering import meter_cluster
    from apps.fleet.services import sync_inventory
    from apps.health.ingest import run_cycle

    out = {}
    for name, fn in (
        ("ingest_cluster_task", lambda: run_cycle(cluster.pk)),
        ("sync_cluster_task", lambda: sync_inventory(cluster.pk)),
        ("meter_cluster_task", lambda: meter_cluster(cluster.pk)),
    ):
        samples = []
        for _ in range(REPEAT):
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
        out[name] = statistics.median(samples)
    return out


# Processes


def start(argv: list[str], log: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen(  # noqa: S603 - fixed argv
        argv, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=str(ROOT)
    )


def stop(children: list[subprocess.Popen]) -> None:
    for child in children:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


class WebClient(threading.Thread):
    """Reads what an on-call's browser and CLI read, every 2 s, while the workers run."""

    PATHS = ("/api/v1/overview/", "/api/v1/capacity/", "/api/v1/nodes/?page_size=500", "/api/v1/clusters/")

    def __init__(self, token: str):
        super().__init__(daemon=True)
        self.token, self.halt = token, threading.Event()
        self.timings: dict[str, list[float]] = {p: [] for p in self.PATHS}
        self.statuses: dict[int, int] = {}

    def run(self) -> None:
        while not self.halt.wait(2.0):
            for path in self.PATHS:
                conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
                started = time.perf_counter()
                try:
                    conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
                    response = conn.getresponse()
                    response.read()
                    self.statuses[response.status] = self.statuses.get(response.status, 0) + 1
                except OSError:
                    self.statuses[0] = self.statuses.get(0, 0) + 1
                finally:
                    conn.close()
                self.timings[path].append(time.perf_counter() - started)


def wait_serving() -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=2)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("gunicorn did not answer; see var/bench/fleet-scale-web.log")


def purge() -> None:
    """Empty the queues, and forget the fan-out stamps of what was in them (else each cluster would wait for its
    stamp to expire, FAN_OUT_STAMP_EXPIRY_S, before its first task of the run)."""
    from apps.fleet.models import FanOutStamp
    from console.celery import app

    with app.connection_for_write() as conn:
        for queue in settings.CELERY_QUEUE_NAMES:
            conn.default_channel.queue_purge(queue)
    FanOutStamp.objects.all().delete()


# Report


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def report(records: list[dict], window: tuple[float, float], floor: dict, cpu: dict, rss: dict, web) -> None:
    begin, end = window
    span = end - begin
    print(f"\nwindow {span:.0f} s; {len(records)} tasks finished in it")
    print(
        f"{'task':<28}{'runs':>6}{'dur med':>9}{'p95':>8}{'max':>8}{'alone':>8}{'× alone':>9}"
        f"{'wait med':>10}{'p95':>8}{'max':>8}{'wait+dur max':>14}{'interval':>10}"
    )
    by_task: dict[str, list[dict]] = {}
    for r in records:
        by_task.setdefault(r["task"], []).append(r)
    for name, runs in sorted(by_task.items(), key=lambda kv: -len(kv[1])):
        durations = [r["finished"] - r["started"] for r in runs]
        waits = [r["started"] - r["sent"] for r in runs if r["sent"]]
        whole = [r["finished"] - r["sent"] for r in runs if r["sent"]]
        alone = floor.get(name)
        med = statistics.median(durations)
        print(
            f"{name:<28}{len(runs):>6}{med:>9.2f}{pct(durations, 0.95):>8.2f}{max(durations):>8.2f}"
            f"{(f'{alone:.2f}' if alone else ''):>8}{(f'{med / alone:.2f}' if alone else ''):>9}"
            f"{statistics.median(waits) if waits else 0:>10.2f}{pct(waits, 0.95):>8.2f}{max(waits, default=0):>8.2f}"
            f"{max(whole, default=0):>14.2f}{INTERVALS.get(name, ''):>10}"
        )
    for name, interval in INTERVALS.items():
        runs = by_task.get(name, [])
        late = [r for r in runs if r["sent"] and r["finished"] - r["sent"] > interval]
        print(f"  {name}: {len(runs)} runs, {len(late)} finished later than one interval ({interval} s) after sent")
    print("\nworkers (busy share = task seconds / (window × processes); CPU = CPU seconds / window, in cores)")
    for worker, seconds in sorted((name, seconds) for name, seconds in cpu.items() if name in WORKER_NAMES):
        busy = sum(
            min(r["finished"], end) - max(r["started"], begin) for r in records if r["worker"].startswith(worker + "@")
        )
        processes = settings.CELERY_WORKER_CONCURRENCY
        print(
            f"  {worker}: busy {busy / (span * processes):.0%} of {processes} processes; "
            f"CPU {seconds / span:.2f} cores; peak RSS per process {max(rss[worker]):.0f} MB "
            f"(all {len(rss[worker])} processes {sum(rss[worker]):.0f} MB)"
        )
    print(f"  web (gunicorn, 2 workers): peak RSS per process {max(rss['web']):.0f} MB; requests {web.statuses}")
    for path, timings in web.timings.items():
        if timings:
            median, worst = statistics.median(timings) * 1000, max(timings) * 1000
            print(f"    GET {path}: median {median:.0f} ms, max {worst:.0f} ms")
    if "machine" in cpu:
        workers = sum(seconds for name, seconds in cpu.items() if name in WORKER_NAMES)
        others = cpu["machine"] - workers - cpu["postgres"] - cpu["web"]
        print(
            f"machine: busy {cpu['machine'] / span:.2f} of {os.cpu_count()} cores: workers {workers / span:.2f}, "
            f"PostgreSQL {cpu['postgres'] / span:.2f}, web {cpu['web'] / span:.2f}, "
            f"everything else (beat, this client, other jobs) {others / span:.2f}"
        )
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; nproc {os.cpu_count()}")


def settle() -> None:
    """Every run starts from the same tables: what earlier runs left dead is vacuumed away (rewritten where most of
    a table is dead: the health cycle updates every node's row each scrape), and statistics are fresh."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_stat_user_tables WHERE n_dead_tup > GREATEST(n_live_tup, 10000)")
        bloated = [row[0] for row in cursor.fetchall()]
        for table in bloated:
            cursor.execute(f'VACUUM (FULL, ANALYZE) "{table}"')
        cursor.execute("VACUUM ANALYZE")
    print(f"settled: {len(bloated)} tables rewritten ({', '.join(bloated) or 'none'}), the rest vacuumed")


@contextlib.contextmanager
def autovacuum():
    """PostgreSQL's autovacuum on for the window, as in a deployment. A test machine's server may run with it off
    (CI's configuration turns it off for speed); it is then turned on (ALTER SYSTEM, reload) and put back after.
    Without it the health cycle's updated rows pile up: five runs back to back grew health_nodehealth to 3 GB for
    12,800 live rows, and every figure with it. BENCH_AUTOVACUUM=0 leaves the server as it is."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        was = cursor.fetchone()[0]
        changed = was == "off" and os.environ.get("BENCH_AUTOVACUUM", "1") == "1"
        if changed:
            cursor.execute("ALTER SYSTEM SET autovacuum = on")
            cursor.execute("SELECT pg_reload_conf()")
    print(f"autovacuum: {'on for the window (the server had it off)' if changed else was}")
    try:
        yield
    finally:
        if changed:
            with connection.cursor() as cursor:
                cursor.execute("ALTER SYSTEM RESET autovacuum")
                cursor.execute("SELECT pg_reload_conf()")


def main() -> None:
    clusters, token = seed()
    if os.environ.get("BENCH_SEED_ONLY") == "1":
        return  # seeded for a later BENCH_REUSE=1 run
    settle()
    with autovacuum():
        run(clusters, token)


def run(clusters, token) -> None:
    floor = floors(clusters[0])
    print(f"alone (median of {REPEAT}): " + ", ".join(f"{k} {v:.2f} s" for k, v in floor.items()))
    purge()
    LOGS.mkdir(parents=True, exist_ok=True)
    TASK_LOG.unlink(missing_ok=True)
    # gunicorn refuses a weak key (apps/core/checks.py): the processes get a strong one of their own
    env = {**os.environ, "BENCH_TASK_LOG": str(TASK_LOG), "SECRET_KEY": secrets.token_hex(32)}
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    celery = [sys.executable, "-m", "celery", "-A", "bench.fleet_scale_app"]
    workers = {
        f"w{i}": start(
            [*celery, "worker", "--pool", "prefork", "-n", f"w{i}@%h", "--loglevel", "WARNING"],
            LOGS / f"fleet-scale-w{i}.log",
            env,
        )
        for i in range(1, WORKERS + 1)
    }
    web_server = start(
        [sys.executable, "-m", "gunicorn", "console.wsgi", "--bind", f"127.0.0.1:{PORT}", "--workers", "2"],
        LOGS / "fleet-scale-web.log",
        env,
    )
    beat = start(
        [*celery, "beat", "--loglevel", "WARNING", "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler"],
        LOGS / "fleet-scale-beat.log",
        env,
    )
    children = [*workers.values(), web_server, beat]
    web = WebClient(token)
    try:
        wait_serving()
        time.sleep(5)  # the workers' processes forked
        cpu0 = {name: cpu_seconds(p.pid) for name, p in workers.items()}
        cpu0.update(web=cpu_seconds(web_server.pid), postgres=postgres_seconds(), machine=machine_busy_seconds())
        begin = time.time()
        web.start()
        print(f"running {SECONDS} s: beat, {WORKERS} workers × {settings.CELERY_WORKER_CONCURRENCY} processes, web")
        time.sleep(SECONDS)
        end = time.time()
        web.halt.set()
        cpu = {name: cpu_seconds(p.pid) - cpu0[name] for name, p in workers.items()}
        cpu.update(
            web=cpu_seconds(web_server.pid) - cpu0["web"],
            postgres=postgres_seconds() - cpu0["postgres"],
            machine=machine_busy_seconds() - cpu0["machine"],
        )
        rss = {name: peak_rss_mb(p.pid) for name, p in workers.items()}
        rss["web"] = peak_rss_mb(web_server.pid)[1:] or peak_rss_mb(web_server.pid)  # the workers, not the arbiter
    finally:
        stop(children)
    web.join(timeout=60)
    records = [json.loads(line) for line in TASK_LOG.read_text().splitlines() if line.strip()]
    records = [r for r in records if r["started"] >= begin and r["finished"] <= end]
    report(records, (begin, end), floor, cpu, rss, web)


if __name__ == "__main__":
    main()
