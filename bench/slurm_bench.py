"""Slurm backend round trips on the real local cluster (scripts/slurm-local.sh start first).

    SLURM_CONF=/tmp/gpuc-slurm/etc/slurm.conf .venv/bin/python bench/slurm_bench.py

BENCH_RUNS (default 5) runs of BENCH_REPEAT (default 30) calls of each variant, interleaved call by call with
the baseline: a bare `sbatch --parsable` of the same script (one RPC). The outbox's first try of an entry
submits with `first_attempt` (sbatch only, issue 23 part 3); a retry looks the name up first (the
controller, then accounting for names the controller does not hold). Jobs are 1-GPU `true` jobs, cancelled at
the end. No database is touched.
"""

# ruff: noqa: S108, S603, S607  (a benchmark running Slurm's own commands against the local test cluster)
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("OUTBOUND_ALLOWED_NETWORKS", "127.0.0.1/32")  # slurmrestd of the local cluster

import django  # noqa: E402

django.setup()

from apps.backends.render.spec import TrainingJobSpec  # noqa: E402
from apps.backends.render.workload import WorkloadContext  # noqa: E402
from apps.backends.slurm.backend import SlurmBackend  # noqa: E402
from apps.backends.types import WorkloadSpec  # noqa: E402
from apps.fleet.models import Cluster  # noqa: E402

REPEAT = int(os.environ.get("BENCH_REPEAT", "30"))
CONF = os.environ.get("SLURM_CONF", "/tmp/gpuc-slurm/etc/slurm.conf")
JOBS = str(Path(CONF).parent.parent / "jobs")
RESTD = os.environ.get("SLURM_RESTD_URL", "http://127.0.0.1:6820")
ENV = {**os.environ, "SLURM_CONF": CONF}
PREFIX = f"bench-{uuid.uuid4().hex[:6]}"


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def median_ms(fn) -> float:
    return statistics.median(timed(fn) for _ in range(REPEAT))


def job(name: str) -> WorkloadSpec:
    """A 1-GPU `true` job as the console submits it: the typed spec and its render context (the backend renders
    the sbatch script), as account root with QOS normal, which the local cluster has."""
    spec = TrainingJobSpec(
        name=name, tenant="bench", queue="bench", image="busybox:1.36", command=["true"], gpu_model="a100",
        tier="normal", max_runtime_s=60, retries=0,
    )  # fmt: skip
    context = WorkloadContext(
        name=name, workload_id=name, queue="bench-bench", tier="normal", gpu_model="a100", slurm_account="root"
    )
    return WorkloadSpec(
        name=name, tenant="bench", gpu_model="a100", command=["true"], duration_s=60, source=spec, context=context
    )


def backend(mode: str) -> SlurmBackend:
    connection = {"slurm_cluster": "gpuc", "slurm_conf": CONF, "output_dir": JOBS, "containers": "none"}
    if mode == "rest":
        token = subprocess.run(
            ["scontrol", "token", "username=root", "lifespan=3600"], env=ENV, capture_output=True, text=True, check=True
        ).stdout.strip()
        os.environ["GPUC_SECRET_BENCH_SLURM_JWT"] = token.removeprefix("SLURM_JWT=")
        connection.update(mode="rest", restd_url=RESTD)
    cluster = Cluster(name="gpuc", kind="slurm", connection=connection, secret_env="GPUC_SECRET_BENCH_SLURM_JWT")
    return SlurmBackend(cluster)


RUNS = int(os.environ.get("BENCH_RUNS", "5"))


def submit_rows(counter, script: str) -> list[tuple[str, list[float]]]:
    """Submission against its floor, interleaved call by call (a bare sbatch, then each backend variant in turn)
    so that the other work sharing the machine weighs on all of them alike; one median per run."""
    cli, rest = backend("cli"), backend("rest")

    def raw_sbatch():
        subprocess.run(
            ["sbatch", "--parsable", f"--job-name={PREFIX}-raw-{next(counter)}"],
            input=script, env=ENV, capture_output=True, text=True, check=True,
        )  # fmt: skip

    def first(b, mode):
        spec = job(f"{PREFIX}-{mode}-{next(counter)}")
        spec.first_attempt = True  # the outbox's first try of an entry: no earlier attempt can have submitted it
        return lambda: b.submit(spec)

    def recovering(b, mode):
        spec = job(f"{PREFIX}-{mode}-rec-{next(counter)}")  # a retry: the name is new to Slurm, so both lookups
        return lambda: b.submit(spec)

    held = job(f"{PREFIX}-held-{next(counter)}")
    cli.submit(held)  # a retry of a submission that did reach Slurm: found in the controller, no sbatch
    variants = [
        ("baseline: bare `sbatch --parsable` (subprocess)", lambda: raw_sbatch),
        ("backend submit, mode cli, first attempt (the hot path: sbatch only)", lambda: first(cli, "cli")),
        ("backend submit, mode rest, first attempt (POST job/submit only)", lambda: first(rest, "rest")),
        ("backend submit, mode cli, a retry of a name Slurm never saw (squeue, sacct, sbatch)",
         lambda: recovering(cli, "cli")),
        ("backend submit, mode cli, a retry of a name the controller holds (squeue only)",
         lambda: (lambda: cli.submit(held))),
    ]  # fmt: skip
    per_run: list[list[float]] = [[] for _ in variants]
    for _ in range(RUNS):
        samples: list[list[float]] = [[] for _ in variants]
        for _ in range(REPEAT):
            for i, (_, make) in enumerate(variants):
                call = make()
                samples[i].append(timed(call))
        for i, values in enumerate(samples):
            per_run[i].append(statistics.median(values))
    return [(what, per_run[i]) for i, (what, _) in enumerate(variants)]


def main() -> None:
    counter = iter(range(10**6))
    script = f"#!/bin/bash\n#SBATCH --gres=gpu:a100:1\n#SBATCH --output={JOBS}/%x-%j.out\ntrue\n"
    rows = submit_rows(counter, script)
    baseline = rows[0][1]
    print(f"Slurm submit against bare sbatch: {RUNS} runs, median of {REPEAT} interleaved calls each per run")
    print("| what | median of run medians | run medians | × bare sbatch (median of per-run ratios) |")
    print("|---|---:|---|---:|")
    for what, medians in rows:
        ratio = statistics.median(m / b for m, b in zip(medians, baseline, strict=True))
        runs = ", ".join(f"{m:.1f}" for m in medians)
        print(f"| {what} | {statistics.median(medians):.1f} ms | {runs} | {ratio:.2f} |")
    other = []
    for mode in ("cli", "rest"):
        b = backend(mode)
        name = f"{PREFIX}-{mode}-1"
        other.append((f"backend status of one job, mode {mode}", median_ms(lambda b=b, n=name: b.status([n]))))
        missing = [f"{PREFIX}-never-submitted"]
        lookup = median_ms(lambda b=b, missing=missing: b._accounting(missing))
        other.append((f"name lookup in accounting (recovery only), mode {mode}", lookup))
        other.append((f"backend inventory (4 nodes, 32 GPUs), mode {mode}", median_ms(b.inventory)))
    jobs = subprocess.run(["squeue", "-h", "-o", "%A %j"], env=ENV, capture_output=True, text=True).stdout.split("\n")
    ids = [line.split()[0] for line in jobs if PREFIX in line]
    if ids:
        subprocess.run(["scancel", *ids], env=ENV, check=False)
    print(f"\nOther round trips, medians of {REPEAT}")
    print("| what | median |\n|---|---:|")
    for what, ms in other:
        print(f"| {what} | {ms:.1f} ms |")


if __name__ == "__main__":
    main()
