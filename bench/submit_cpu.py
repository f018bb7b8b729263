"""Where a submission's CPU goes: gunicorn workers, PostgreSQL backends and the client, per request.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_bench .venv/bin/python bench/submit_cpu.py

Starts the submission benchmark's server (bench/submit_bench.py), posts 600 submissions and 600 bare
INSERTs, and reads the processes' CPU time from /proc before and after each load. At 2 cores, the
sum per request bounds the throughput; a rate below that bound means CPU sat idle (waiting on locks).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django.db import connection

import bench.submit_bench as sb

HZ = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


def machine_busy() -> int:
    """Every process's CPU on the machine (ticks, all cores): what the per-process sums leave out (Redis, the
    kernel's loopback traffic, PostgreSQL's own background processes) shows as the difference."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return user + nice + system + irq + softirq + steal


def worker_pids(parent: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == parent]


def _ppid(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().split(")")[1].split()[1])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def backend_pids() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return [row[0] for row in cursor.fetchall()]


def submission(i: int) -> tuple[str, bytes]:
    return f"cpu-{time.time()}-{i}", json.dumps({"kind": "training", "spec": sb.spec(300000 + i)}).encode()


def main() -> None:
    token = sb.setup()
    sb.client_quiet()
    argv = [sys.executable, "-m", "gunicorn", "console.wsgi", "--bind", f"127.0.0.1:{sb.PORT}"]
    server = subprocess.Popen([*argv, "--workers", sb.WORKERS, "--log-level", "warning"], env=sb.ENV, cwd=sb.ROOT)  # noqa: S603
    try:
        sb.wait_until_serving()
        sb.load("/api/v1/workloads/", [submission(100000 + i) for i in range(60)], token)
        sb.load("/api/v1/_bench/insert/", [(f"w{i}", b"{}") for i in range(60)], token)
        for name, path, items in (
            ("submissions", "/api/v1/workloads/", [submission(i) for i in range(600)]),
            ("bare INSERTs", "/api/v1/_bench/insert/", [(f"b{i}", b"{}") for i in range(600)]),
        ):
            workers, backends = worker_pids(server.pid), backend_pids()
            w0, g0, c0, m0 = cpu_ticks(workers), cpu_ticks(backends), os.times(), machine_busy()
            seconds, _, statuses = sb.load(path, items, token)
            w1, g1, c1, m1 = cpu_ticks(workers), cpu_ticks(backends), os.times(), machine_busy()
            n = len(items)
            client = (c1.user - c0.user + c1.system - c0.system) / n * 1000
            print(
                f"{name}: {n / seconds:.0f} req/s; CPU per request: gunicorn {(w1 - w0) / HZ / n * 1000:.2f} ms, "
                f"PostgreSQL {(g1 - g0) / HZ / n * 1000:.2f} ms, client {client:.2f} ms; "
                f"the whole machine {(m1 - m0) / HZ / n * 1000:.2f} ms  {statuses}"
            )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
