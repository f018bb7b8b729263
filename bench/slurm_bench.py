"""Slurm backend round trips on the real local cluster (scripts/slurm-local.sh start first).

    SLURM_CONF=/tmp/gpuc-slurm/etc/slurm.conf .venv/bin/python bench/slurm_bench.py

Medians of BENCH_REPEAT (default 30) calls each. Baseline in the same run: a bare `sbatch --parsable`
of the same script (one RPC, what DESIGN.md quotes as 5-8 ms). The backend's submit adds the
idempotency lookup by name (all jobs from the controller, then accounting for names the controller no
longer holds) and renders the console's sbatch script. Jobs are 1-GPU `true` jobs, cancelled at the end.
No database is touched.
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
    connection = {"slurm_cluster": "gpuc", "slurm_conf": CONF, "output_dir": JOBS}
    if mode == "rest":
        token = subprocess.run(
            ["scontrol", "token", "username=root", "lifespan=3600"], env=ENV, capture_output=True, text=True, check=True
        ).stdout.strip()
        os.environ["BENCH_SLURM_JWT"] = token.removeprefix("SLURM_JWT=")
        connection.update(mode="rest", restd_url=RESTD)
    return SlurmBackend(Cluster(name="gpuc", kind="slurm", connection=connection, secret_env="BENCH_SLURM_JWT"))


def main() -> None:
    counter = iter(range(10**6))
    script = f"#!/bin/bash\n#SBATCH --gres=gpu:a100:1\n#SBATCH --output={JOBS}/%x-%j.out\ntrue\n"

    def raw_sbatch():
        subprocess.run(
            ["sbatch", "--parsable", f"--job-name={PREFIX}-raw-{next(counter)}"],
            input=script, env=ENV, capture_output=True, text=True, check=True,
        )  # fmt: skip

    rows = [("baseline: bare `sbatch --parsable` (subprocess)", median_ms(raw_sbatch))]
    for mode in ("cli", "rest"):
        b = backend(mode)

        names: list[str] = []

        def submit(b=b, mode=mode, names=names):
            names.append(f"{PREFIX}-{mode}-{next(counter)}")
            b.submit(job(names[-1]))

        rows.append((f"backend submit, mode {mode} (name lookups, then sbatch)", median_ms(submit)))
        rows.append((f"backend status of one job, mode {mode}", median_ms(lambda b=b, n=names[0]: b.status([n]))))
        missing = [f"{PREFIX}-never-submitted"]
        lookup = median_ms(lambda b=b, missing=missing: b._accounting(missing))
        rows.append((f"  of which: name lookup in accounting, mode {mode}", lookup))
        rows.append((f"  of which: all jobs from the controller, mode {mode}", median_ms(b._jobs)))
        rows.append((f"backend inventory (4 nodes, 32 GPUs), mode {mode}", median_ms(b.inventory)))
    jobs = subprocess.run(["squeue", "-h", "-o", "%A %j"], env=ENV, capture_output=True, text=True).stdout.split("\n")
    ids = [line.split()[0] for line in jobs if PREFIX in line]
    if ids:
        subprocess.run(["scancel", *ids], env=ENV, check=False)
    print(f"Slurm backend round trips, medians of {REPEAT}")
    print("| what | median |\n|---|---:|")
    for what, ms in rows:
        print(f"| {what} | {ms:.1f} ms |")


if __name__ == "__main__":
    main()
