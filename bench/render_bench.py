"""Workload rendering benchmark for issue 5: a 64-worker training job, target <= 20 ms per rendering.

    .venv/bin/python bench/render_bench.py        (BENCH_REPEAT=200 by default; pure Python, no database)

Measures, each as the median of BENCH_REPEAT runs after a warm-up:
* parse_spec of the 64-worker x 8 GPU job (the API's validation path),
* render_kubernetes for Kueue (Service + Indexed Job) and for Volcano (Job), and their YAML text,
* render_slurm (the sbatch script),
* for scale, the same job's strict validation (kubernetes-validate on 5 versions / CRD schema), which is
  a pre-flight check, not part of rendering.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apps.backends.catalog import catalog_by_code  # noqa: E402
from apps.backends.render.workload import (  # noqa: E402
    RenderContext,
    SlurmContext,
    render_kubernetes,
    render_slurm,
    validation_errors,
)
from apps.workloads.specs import parse_spec  # noqa: E402

REPEAT = int(os.environ.get("BENCH_REPEAT", "200"))
TARGET_MS = 20.0
JOB = {
    "name": "pretrain-405b",
    "tenant": "acme",
    "queue": "train",
    "tier": "training",
    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
    "command": ["python", "-m", "train"],
    "args": ["--config", "configs/405b.yaml", "--global-batch", "4096"],
    "env": {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5", "WANDB_PROJECT": "405b"},
    "workers": 64,
    "gpus_per_worker": 8,
    "gpu_model": "h100",
    "topology": "leaf",
    "max_runtime_s": 604_800,
    "retries": 3,
    "volumes": [
        {"claim": "datasets", "mount_path": "/data", "read_only": True},
        {"claim": "checkpoints", "mount_path": "/ckpt"},
    ],
}


def context(queueing: str) -> RenderContext:
    return RenderContext(
        namespace="acme-train",
        queue_name="acme-train",
        priority_class="training",
        queueing=queueing,
        workload_id=123456,
        product_label="NVIDIA-H100-80GB-HBM3",
        tolerations=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
    )


def median_ms(fn: Callable[[], object], repeat: int = REPEAT) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    catalog = catalog_by_code()
    spec = parse_spec("training", JOB, catalog)
    slurm = SlurmContext(
        account="acme_train",
        qos="training",
        partition="gpu",
        gres_type="h100",
        output_dir="/logs",
        # Since Slurm runs images only through a named container runtime, with the claims' directories on it.
        containers="pyxis",
        volume_dirs={"datasets": "/lustre/datasets", "checkpoints": "/lustre/ckpt"},
    )
    kueue, volcano = context("kueue"), context("volcano")
    rows = [
        ("parse_spec (64 workers x 8 H100)", median_ms(lambda: parse_spec("training", JOB, catalog)), False),
        ("render_kubernetes, Kueue (Service + Indexed Job)", median_ms(lambda: render_kubernetes(spec, kueue)), True),
        ("render_kubernetes, Volcano (Job)", median_ms(lambda: render_kubernetes(spec, volcano)), True),
        ("render_kubernetes + to_yaml, Kueue", median_ms(lambda: render_kubernetes(spec, kueue).to_yaml()), False),
        ("render_kubernetes + to_yaml, Volcano", median_ms(lambda: render_kubernetes(spec, volcano).to_yaml()), False),
        ("render_slurm (sbatch script)", median_ms(lambda: render_slurm(spec, slurm)), True),
        (
            "parse_spec + render_kubernetes + to_yaml, Kueue (the API's whole path)",
            median_ms(lambda: render_kubernetes(parse_spec("training", JOB, catalog), kueue).to_yaml()),
            False,
        ),
        (
            "strict validation, Kueue objects (5 Kubernetes versions)",
            median_ms(lambda: validation_errors(render_kubernetes(spec, kueue)), 20),
            False,
        ),
        (
            "strict validation, Volcano Job (CRD schema)",
            median_ms(lambda: validation_errors(render_kubernetes(spec, volcano)), 20),
            False,
        ),
    ]
    print(f"Rendering a 64-worker training job: median of {REPEAT} runs (validation: 20), target <= {TARGET_MS} ms")
    print(f"{'what':<74} {'median ms':>10}")
    failed = False
    for what, ms, targeted in rows:
        mark = ""
        if targeted:
            mark = "  ok" if ms <= TARGET_MS else "  OVER TARGET"
            failed |= ms > TARGET_MS
        print(f"{what:<74} {ms:>10.3f}{mark}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
