"""Chaos on the real local Slurm cluster (issue 23 part 7): N workloads submitted through the console while
its Celery workers are killed with kill -9 (twice) and slurmctld is stopped for a minute.

    flock /tmp/slurm.lock scripts/with-slurm.sh env DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_chaos \
        .venv/bin/python bench/slurm_chaos_bench.py          # CHAOS_N=200 CHAOS_OUTAGE_S=60 (the defaults)

What runs: the console's submission service (admission, audit, outbox row) for each workload, at CHAOS_RATE per
second; CHAOS_WORKERS real Celery workers (prefork, concurrency 2) doing the outbox tasks against Slurm; and the
beat's part that matters here, the outbox sweep of the 10 s workloads tick (drain_outbox), run by this script
every 10 s. The cluster's inventory is synced once before the run (32 A100 free) and not again, so admission,
which takes capacity as last synced and holds to quota (a guarantee of N), admits every workload: Slurm queues
the jobs (1 GPU, `sleep 1`) on its 32 GPUs. The schedule, in seconds after the first submission:
every worker killed with kill -9 at CHAOS_KILL_AT (default 8 and 20; each time they are started again at
once, as systemd would), slurmctld stopped (SIGTERM) at CHAOS_OUTAGE_AT (default 25) for CHAOS_OUTAGE_S.

A workload is done when its submission is recorded: its outbox entry done (the workload then says which Slurm
job it is; reconcile, not run here, moves it on from "admitted"). Checked at the end: exactly N workloads,
exactly N Slurm jobs carrying their names (squeue and sacct), no name twice, and the time from slurmctld's
return to the last workload done.
"""

# ruff: noqa: S108, S603, S607  (a benchmark running Slurm's and Celery's commands against the local test cluster)
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_chaos")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/12")

import django  # noqa: E402

django.setup()

N = int(os.environ.get("CHAOS_N", "200"))
RATE = float(os.environ.get("CHAOS_RATE", "5"))  # submissions per second
WORKERS = int(os.environ.get("CHAOS_WORKERS", "2"))
KILL_AT = [float(x) for x in os.environ.get("CHAOS_KILL_AT", "8,20").split(",") if x]
OUTAGE_AT = float(os.environ.get("CHAOS_OUTAGE_AT", "25"))
OUTAGE_S = float(os.environ.get("CHAOS_OUTAGE_S", "60"))
TICK_S = 10.0
TIMEOUT_S = float(os.environ.get("CHAOS_TIMEOUT_S", "900"))
CONF = os.environ.get("SLURM_CONF", "/tmp/gpuc-slurm/etc/slurm.conf")
JOBS = str(Path(CONF).parent.parent / "jobs")
SLURM_ENV = {**os.environ, "SLURM_CONF": CONF}
SCRIPT = ROOT / "scripts" / "slurm-local.sh"
RUN = uuid.uuid4().hex[:6]
TORCHRUN = '#!/bin/sh\nwhile [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n'


def log(message: str, start: float | None = None) -> None:
    at = f"t={time.monotonic() - start:6.1f}s " if start is not None else ""
    print(f"{at}{message}", flush=True)


def stand_ins() -> str:
    bin_dir = Path(JOBS) / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "torchrun").write_text(TORCHRUN)
    (bin_dir / "torchrun").chmod(0o755)
    return str(bin_dir)


def setup():
    """A Slurm cluster row for the local cluster (inventory synced once), a tenant,
    a queue bound to Slurm account a_chaos with a guarantee of N a100 (pushed to Slurm), and a member who submits."""
    from apps.accounts.models import Membership, Tenant, User
    from apps.backends.registry import get_backend
    from apps.fleet.models import Cluster, GpuModel
    from apps.fleet.services import sync_inventory
    from apps.tenancy.desired_state import build_desired_state
    from apps.tenancy.models import Admission, Queue, QueueBinding, Quota
    from apps.workloads.models import OutboxEntry, Workload
    from bench.fleet_bench import ensure_database

    ensure_database()
    OutboxEntry.objects.all().delete()
    Workload.objects.all().delete()
    Admission.objects.all().delete()
    Cluster.objects.filter(name="chaos").delete()
    connection = {
        "slurm_cluster": "gpuc",
        "slurm_conf": CONF,
        "output_dir": JOBS,
        "partition": "gpu",
        "job_path": f"{stand_ins()}:/usr/local/bin:/usr/bin:/bin",
        "containers": "none",
    }
    cluster = Cluster.objects.create(name="chaos", kind="slurm", connection=connection)
    assert sync_inventory(cluster.pk).ok  # once: the nodes' free GPUs as now (not re-synced during the run)
    tenant, _ = Tenant.objects.get_or_create(slug="chaos", defaults={"name": "Chaos"})
    if not tenant.path:
        tenant.path = f"/{tenant.pk}/"
        tenant.save(update_fields=["path"])
    queue, _ = Queue.objects.get_or_create(tenant=tenant, name="train")
    QueueBinding.objects.update_or_create(queue=queue, cluster=cluster, defaults={"slurm_account": "a_chaos"})
    Quota.objects.update_or_create(queue=queue, gpu_model=GpuModel.objects.get(code="a100"), defaults={"guaranteed": N})
    # The tenant's Slurm account and the tiers' QOS, as the console pushes them (GrpTRES gres/gpu=N).
    get_backend(cluster).quota_pusher().push(build_desired_state(cluster))
    user, _ = User.objects.get_or_create(username="chaos-bot")
    Membership.objects.get_or_create(user=user, tenant=tenant, defaults={"role": "member"})
    return user


def spec(i: int) -> dict:
    return {
        "name": f"c{RUN}-{i}",
        "tenant": "chaos",
        "queue": "train",
        "tier": "training",
        "image": "busybox:1.36",
        "command": ["sleep"],
        "args": ["1"],
        "workers": 1,
        "gpus_per_worker": 1,
        "gpu_model": "a100",
        "max_runtime_s": 600,
    }


class Workers:
    """CHAOS_WORKERS Celery workers, each its own process group (so kill -9 takes the pool's children too)."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []
        self.generation = 0

    def start(self) -> None:
        self.generation += 1
        env = {**os.environ, "LOG_LEVEL": "WARNING"}
        for i in range(WORKERS):
            argv = [
                str(ROOT / ".venv" / "bin" / "celery"), "-A", "console", "worker", "--pool=prefork", "--concurrency=2",
                "--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat",
                "-n", f"chaos{i}-g{self.generation}-{RUN}@%h",
            ]  # fmt: skip
            out = open(f"/tmp/chaos-worker-{RUN}-{i}-{self.generation}.log", "w")  # noqa: SIM115
            self.procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True))

    def kill9(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in self.procs:
            proc.wait()
        self.procs = []

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        self.procs = []


def slurmctld_pid() -> int:
    return int((Path(CONF).parent.parent / "run" / "slurmctld.pid").read_text())


def controller_up() -> bool:
    ping = subprocess.run(["scontrol", "ping"], env=SLURM_ENV, capture_output=True, text=True, check=False)
    return "is UP" in ping.stdout


def slurm_names(prefix: str) -> Counter:
    """Job names starting with `prefix` in the controller and in accounting, each job counted once (by id)."""
    jobs: dict[str, str] = {}
    out = subprocess.run(
        ["squeue", "-h", "--states=all", "-o", "%A|%j"], env=SLURM_ENV, capture_output=True, text=True, check=True
    ).stdout
    acct = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-a", "-S", "now-1days", "-o", "JobIDRaw,JobName"],
        env=SLURM_ENV, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for line in [*out.splitlines(), *acct.splitlines()]:
        job_id, _, name = line.partition("|")
        if name.startswith(prefix):
            jobs[job_id] = name
    return Counter(jobs.values())


def main() -> int:
    from django.conf import settings

    from apps.workloads import services
    from apps.workloads.models import OutboxEntry, OutboxStatus, Workload
    from apps.workloads.services.outbox import drain_outbox

    # Nothing left queued by an earlier run: Celery's default queue and its unacknowledged messages (kombu's keys).
    purge = ["redis-cli", "-u", os.environ["CELERY_BROKER_URL"], "DEL", "celery", "unacked", "unacked_index"]
    subprocess.run(purge, capture_output=True, check=False)
    user = setup()
    workers = Workers()
    workers.start()
    time.sleep(5)  # the workers' start-up, before the clock starts
    log(f"N={N} rate={RATE}/s workers={WORKERS}x2 lease={settings.OUTBOX_LEASE_S}s kills at {KILL_AT} "
        f"slurmctld stopped at {OUTAGE_AT}s for {OUTAGE_S}s")  # fmt: skip
    start = time.monotonic()
    stop = threading.Event()

    def beat():
        while not stop.wait(TICK_S):
            drain_outbox()

    def submitter():
        for i in range(N):
            services.submit_workload(user, kind="training", spec=spec(i), idempotency_key=f"{RUN}-{i}")
            time.sleep(max(0.0, start + (i + 1) / RATE - time.monotonic()))
        log(f"all {N} submitted", start)

    threads = [threading.Thread(target=beat, daemon=True), threading.Thread(target=submitter, daemon=True)]
    for t in threads:
        t.start()
    events = sorted([(at, "kill") for at in KILL_AT] + [(OUTAGE_AT, "outage")])
    returned_at = None
    done_at: dict[int, float] = {}
    pending_events = list(events)
    killed_holding: set[int] = set()
    between: set[int] = set()  # held by a killed worker, with a Slurm job of their name right after the kill
    deadline = start + TIMEOUT_S
    while time.monotonic() < deadline:
        now = time.monotonic() - start
        while pending_events and pending_events[0][0] <= now:
            _, what = pending_events.pop(0)
            if what == "kill":
                # Killed while they hold entries (the point of it): wait up to 15 s for a claim.
                wait_until = time.monotonic() + 15
                live = OutboxEntry.objects.filter(status=OutboxStatus.PROCESSING).exclude(pk__in=killed_holding)
                while time.monotonic() < wait_until and not live.exists():
                    time.sleep(0.05)
                holding = dict(live.values_list("id", "workload__backend_name"))
                workers.kill9()
                killed_holding.update(holding)
                # Which of them the kill caught between sbatch and recording: Slurm has the job already.
                held = len(holding)
                between.update(pk for pk, name in holding.items() if slurm_names(name)[name])
                workers.start()
                log(f"kill -9 of every worker ({held} outbox entries held); started again", start)
            else:
                os.kill(slurmctld_pid(), signal.SIGTERM)
                log("slurmctld stopped (SIGTERM)", start)
                time.sleep(OUTAGE_S)
                started = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, check=False)
                while not controller_up():
                    time.sleep(0.2)
                returned_at = time.monotonic() - start
                log(f"slurmctld back (start: {started.returncode})", start)
        recorded = set(OutboxEntry.objects.filter(status=OutboxStatus.DONE).values_list("workload_id", flat=True))
        t = time.monotonic() - start
        for workload_id in recorded - done_at.keys():
            done_at[workload_id] = t
        failed = OutboxEntry.objects.filter(status=OutboxStatus.FAILED).count()
        if len(done_at) + failed >= N and not pending_events:
            break
        time.sleep(0.5)
    stop.set()
    workers.stop()
    total = Workload.objects.count()
    failed = list(OutboxEntry.objects.filter(status=OutboxStatus.FAILED).values_list("last_error", flat=True)[:3])
    retries = OutboxEntry.objects.filter(attempts__gt=0).count()
    time.sleep(2)
    names = slurm_names("wl")
    ours = set(Workload.objects.values_list("backend_name", flat=True))
    counted = {name: n for name, n in names.items() if name in ours}
    jobs = sum(counted.values())
    duplicates = sum(n - 1 for n in counted.values() if n > 1)
    last = max(done_at.values()) if done_at else float("nan")
    print()
    print("| workloads | Slurm jobs | duplicates | done | failed | entries retried | controller back at | "
          "last done at | last done after the controller's return |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    after = f"{last - returned_at:.1f} s" if returned_at is not None else "-"
    back = f"{returned_at:.1f} s" if returned_at is not None else "-"
    print(f"| {total} | {jobs} | {duplicates} | {len(done_at)} | {len(failed)} | {retries} | {back} | {last:.1f} s | "
          f"{after} |")  # fmt: skip
    if failed:
        print("failed:", failed)
    taken_over = OutboxEntry.objects.filter(pk__in=killed_holding)
    # A claim the worker recorded just before the kill lands is not taken over (attempts 0): only those taken over
    # whose job Slurm already had were caught between sbatch and recording.
    caught = taken_over.filter(pk__in=between, attempts__gt=0).count()
    retried = taken_over.filter(attempts__gt=0).count()
    print(f"entries held by killed workers: {len(killed_holding)}, taken over: {retried}"
          f" ({caught} caught between sbatch and recording); "
          f"now (status, attempts): {sorted(taken_over.values_list('status', 'attempts'))}")  # fmt: skip
    ids = [name for name in ours if name]
    for chunk in range(0, len(ids), 50):
        subprocess.run(["scancel", f"--name={','.join(ids[chunk : chunk + 50])}"], env=SLURM_ENV, check=False)
    ok = total == N and jobs == N and duplicates == 0 and len(done_at) == N
    ok = ok and returned_at is not None and last - returned_at <= 60
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
