"""Submission benchmark for issue 5: 1,000 submissions over real HTTP (gunicorn + PostgreSQL).

    make bench   (with the others; or: DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_bench \
                  .venv/bin/python bench/submit_bench.py)

Starts gunicorn (4 workers) on a benchmark database holding a history of finished workloads (`give_history`)
with a Redis broker and no Celery worker (the backend pushes queue up; this measures the API path: auth,
validation, admission, audit, outbox),
then posts 1,000 workloads with distinct Idempotency-Keys over 16 concurrent connections (one asyncio
client loop), replays 100 of them (same keys: must return the same workloads), and runs the same
load against a bare DRF endpoint doing one INSERT (`console/bench.py`) as the baseline.
"""

from __future__ import annotations

import asyncio
import gc
import http.client
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_bench")
ENV = {
    **os.environ,
    "DJANGO_SETTINGS_MODULE": "console.settings",
    # gunicorn refuses a published or short key (apps/core/checks.py): a fresh one for the benchmark's server.
    "SECRET_KEY": secrets.token_hex(32),
    # The API's rate limits stay on, as deployed (their counters cost every request, both endpoints alike), but at
    # a rate the benchmark never reaches: 1,000 submissions a minute from one token is what it measures.
    "API_THROTTLE_TOKEN": os.environ.get("BENCH_THROTTLE", "1000000/minute"),
    "API_THROTTLE_USER": os.environ.get("BENCH_THROTTLE", "1000000/minute"),
    "DATABASE_URL": DB_URL,
    "CELERY_BROKER_URL": os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/13"),
    "ALLOWED_HOSTS": "127.0.0.1",
    "BENCH_BARE_ENDPOINT": "1",
    "LOG_LEVEL": "WARNING",
}
os.environ.update({k: v for k, v in ENV.items() if k != "LOG_LEVEL"})

import django  # noqa: E402

django.setup()

PORT = int(os.environ.get("BENCH_PORT", "8399"))
N, REPLAY, CONNECTIONS, ROUNDS = 1000, 100, 16, 5
HISTORY = int(os.environ.get("BENCH_HISTORY", "5000"))  # finished workloads the console holds before the run
WORKERS = os.environ.get("BENCH_WORKERS", "4")


def setup() -> str:
    """A simulated 128-node cluster, a tenant with a queue holding 1,024 H100s (and a small one for the
    warm-up, so that the measured 1,000 all fit the first), a member and a token."""
    from apps.accounts import services as accounts
    from apps.accounts.models import Tenant, User
    from apps.fleet.models import Cluster, GpuModel
    from apps.fleet.services import create_simulated_cluster, sync_inventory
    from apps.tenancy.models import Queue, QueueBinding, Quota
    from apps.workloads.models import OutboxEntry, Workload
    from bench.fleet_bench import ensure_database

    ensure_database()
    OutboxEntry.objects.all().delete()
    Workload.objects.all().delete()
    from apps.tenancy.models import Admission

    Admission.objects.all().delete()
    Cluster.objects.filter(name="bench-submit").delete()
    cluster = create_simulated_cluster(None, "bench-submit", {"nodes": 128, "models": {"h100": 1.0}, "seed": 3})
    sync_inventory(cluster.pk)
    tenant, _ = Tenant.objects.get_or_create(slug="bench-ci", defaults={"name": "Bench CI"})
    if not tenant.path:
        tenant.path = f"/{tenant.pk}/"
        tenant.save(update_fields=["path"])
    for name, guaranteed in (("ci", 1024), ("warm", 64)):
        queue, _ = Queue.objects.get_or_create(tenant=tenant, name=name)
        QueueBinding.objects.update_or_create(queue=queue, cluster=cluster, defaults={"namespaces": ["bench-ci"]})
        Quota.objects.update_or_create(
            queue=queue, gpu_model=GpuModel.objects.get(code="h100"), defaults={"guaranteed": guaranteed}
        )
    user, _ = User.objects.get_or_create(username="bench-ci-bot")
    from apps.accounts.models import Membership

    Membership.objects.get_or_create(user=user, tenant=tenant, defaults={"role": "member"})
    _, raw = accounts.issue_token(user, user=user, name="bench", tenant=tenant, role="member")
    give_history(tenant, Queue.objects.get(tenant=tenant, name="warm"), cluster, user)
    from django.db import connection

    with connection.cursor() as cursor:  # the deletes above left dead rows: measure a settled database
        cursor.execute("VACUUM ANALYZE")
    return raw


def give_history(tenant, queue, cluster, user) -> None:
    """HISTORY finished workloads with their released claims, as a console that has run for a while holds.

    Measured on tables that were emptied and then analysed, PostgreSQL plans every statement for empty tables (a
    sequential scan is the cheapest way through one page) and keeps those plans for the connection's life; with no
    autovacuum in the window to analyse them again, each lookup by key then reads the whole table, and a
    submission's cost grew with every workload written before it (the same statements' time at 400 and at 800
    workloads: 0.08 and 0.15 ms for the context statement, 0.27 and 0.44 ms for the one that writes the rows). A
    deployed console's tables are never empty and autovacuum keeps their statistics (docs/deploy-kubernetes.md).
    """
    from django.utils import timezone

    from apps.backends.shares import SHARE_UNITS
    from apps.fleet.models import GpuModel
    from apps.tenancy.models import Admission, AdmissionState, PriorityTier
    from apps.workloads.models import Workload, WorkloadState

    model, tier, now = GpuModel.objects.get(code="h100"), PriorityTier.objects.get(name="training"), timezone.now()
    claims = Admission.objects.bulk_create(
        Admission(
            name=f"workload:bench-ci/done-{i}",
            queue=queue,
            gpu_model=model,
            cluster=cluster,
            gpu_units=SHARE_UNITS,
            tier=tier,
            user=user.username,
            state=AdmissionState.RELEASED,
            decision="admit",
            submitted_at=now,
            admitted_at=now,
            released_at=now,
        )
        for i in range(HISTORY)
    )
    Workload.objects.bulk_create(
        Workload(
            kind="training",
            name=f"done-{i}",
            tenant=tenant,
            queue=queue,
            tier=tier,
            cluster=cluster,
            gpu_model=model,
            gpus=1,
            spec=spec(i, "warm"),
            admission=claim,
            state=WorkloadState.SUCCEEDED,
            backend_name=f"wl{i}-done",
            idempotency_key=f"done-{i}",
            created_by=user,
            finished_at=now,
        )
        for i, claim in enumerate(claims)
    )


def spec(i: int, queue: str = "ci") -> dict:
    return {
        "name": f"ci-job-{i}",
        "tenant": "bench-ci",
        "queue": queue,
        "tier": "training",
        "image": "busybox:1.36",
        "command": ["python", "train.py"],
        "args": ["--step", str(i)],
        "workers": 1,
        "gpus_per_worker": 1,
        "gpu_model": "h100",
    }


def load(path: str, bodies: list[tuple[str, bytes]], token: str) -> tuple[float, list[float], dict[int, int]]:
    """POST every body (key, json) over CONNECTIONS concurrent connections; returns (seconds, latencies, statuses).

    The client is one asyncio loop, not one Python thread per connection: on these two cores a threaded client's
    threads queue for the GIL behind one that the kernel has descheduled, and its requests then sat up
    to 100 ms in the client after the server had answered (matched by Idempotency-Key against the
    server's own timings). Each request is timed from the connect to the end of the response.
    """
    return asyncio.run(_load(path, bodies, token))


async def _load(path: str, bodies: list[tuple[str, bytes]], token: str) -> tuple[float, list[float], dict[int, int]]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{PORT}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n"
    )

    async def post(key: str, body: bytes) -> None:
        request = f"{head}Idempotency-Key: {key}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
        start = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
        writer.write(request)
        response = await reader.read()  # the server closes the connection after the response
        latencies.append(time.perf_counter() - start)
        writer.close()
        status = int(response.split(b" ", 2)[1])
        statuses[status] = statuses.get(status, 0) + 1

    async def worker(items: list[tuple[str, bytes]]) -> None:
        for key, body in items:
            await post(key, body)

    start = time.perf_counter()
    await asyncio.gather(*(worker(bodies[i::CONNECTIONS]) for i in range(CONNECTIONS)))
    return time.perf_counter() - start, latencies, statuses


def client_quiet() -> None:
    """Keep the client's own garbage collector out of the latencies: a full collection of this process (Django, the
    set-up's objects) took about 100 ms, during which its event loop read no response, and the requests in flight
    were timed that much longer (seen as one stall of every connection at once while the server's own request
    times stayed under 22 ms). What the set-up left is collected and frozen before the first request."""
    gc.collect()
    gc.freeze()


def wait_until_serving(path: str = "/healthz") -> None:
    """Until a worker answers: the master listens before its workers have loaded the application."""
    for _ in range(300):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
            connection.request("GET", path)
            connection.getresponse().read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("gunicorn did not answer within 30 s")


def report(label: str, seconds: float, latencies: list[float], statuses: dict[int, int]) -> None:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[int(len(ordered) * 0.99) - 1] * 1000
    print(f"  {label:<38} {len(latencies) / seconds:>7.0f} req/s   p50 {p50:6.1f} ms   p99 {p99:6.1f} ms   {statuses}")


def main() -> None:
    token = setup()
    client_quiet()
    server = subprocess.Popen(  # noqa: S603 - fixed argv
        [
            sys.executable,
            "-m",
            "gunicorn",
            "console.wsgi",
            "--bind",
            f"127.0.0.1:{PORT}",
            "--workers",
            WORKERS,
            "--log-level",
            "warning",
            *os.environ.get("BENCH_GUNICORN_ARGS", "").split(),
        ],
        env=ENV,
        cwd=str(ROOT),
    )
    try:
        wait_until_serving()
        print(
            f"submission benchmark: {N} submissions, {CONNECTIONS} client connections, gunicorn {WORKERS} workers, "
            f"PostgreSQL; {ROUNDS} rounds, each {N // ROUNDS} submissions then {N // ROUNDS} bare INSERTs "
            "(same noise for both)"
        )
        warm = [
            (f"warm-{i}", json.dumps({"kind": "training", "spec": spec(100000 + i, "warm")}).encode())
            for i in range(50)
        ]
        load("/api/v1/workloads/", warm, token)
        load("/api/v1/_bench/insert/", [(f"warm-bare-{i}", b"{}") for i in range(50)], token)
        bodies = [(f"key-{i}", json.dumps({"kind": "training", "spec": spec(i)}).encode()) for i in range(N)]
        bare = [(f"bare-{i}", b"{}") for i in range(N)]
        chunk = N // ROUNDS
        totals = {"submit": [0.0, [], {}], "bare": [0.0, [], {}]}
        ratios = []
        for r in range(ROUNDS):
            rates = {}
            for name, path, items in (
                ("submit", "/api/v1/workloads/", bodies),
                ("bare", "/api/v1/_bench/insert/", bare),
            ):
                seconds, latencies, statuses = load(path, items[r * chunk : (r + 1) * chunk], token)
                total = totals[name]
                total[0] += seconds
                total[1].extend(latencies)
                for status, count in statuses.items():
                    total[2][status] = total[2].get(status, 0) + count
                rates[name] = len(latencies) / seconds
            ratios.append(rates["submit"] / rates["bare"])
            print(f"  round {r + 1}: submissions {rates['submit']:.0f} req/s, bare {rates['bare']:.0f} req/s")
        report("POST /api/v1/workloads/ (new keys)", *totals["submit"])
        seconds, latencies, statuses = load("/api/v1/workloads/", bodies[:REPLAY], token)
        report("same keys again (replays)", seconds, latencies, statuses)
        report("baseline: bare DRF + one INSERT", *totals["bare"])
        print(f"  submissions / bare, median of the rounds: {statistics.median(ratios):.2f}")
        from apps.workloads.models import Workload

        count = Workload.objects.filter(idempotency_key__startswith="key-").count()
        print(f"  workloads created for the {N} keys: {count} (replays created none)")
        # The queue now holds 1,000 of its 1,024: 24 more fit, the rest wait, and each of those decisions
        # reads every queue's use and lending (the borrowing path) under the admission lock.
        full = [(f"full-{i}", json.dumps({"kind": "training", "spec": spec(200000 + i)}).encode()) for i in range(100)]
        report("100 more into the full queue", *load("/api/v1/workloads/", full, token))
        states = Workload.objects.filter(idempotency_key__startswith="full-").values_list("state", flat=True)
        admitted = sum(state == "admitted" for state in states)
        print(f"    admitted {admitted} (24 in the guarantee, the rest borrowed), pending {len(states) - admitted}")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
        from celery import current_app

        with current_app.connection_for_write() as conn:
            conn.default_channel.queue_purge("celery")


if __name__ == "__main__":
    main()
