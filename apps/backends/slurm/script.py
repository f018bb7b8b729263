"""The sbatch script the backend submits for a WorkloadSpec.

A workload submitted through the console arrives with `spec.manifest` set to the script the workloads
renderer made (apps/backends/render/workload/slurm.py: torchrun, inference engines, hostile-input-safe quoting);
it is submitted as it is. A bare WorkloadSpec (a command, workers x GPUs) gets a small script here: one
`srun` step per node running the command as one exactly-quoted argument vector.
"""

from __future__ import annotations

import math

from apps.backends.base import PermanentBackendError
from apps.backends.render.errors import RenderError
from apps.backends.render.workload.common import sh_join
from apps.backends.render.workload.slurm import DIRECTIVE_VALUE, SRUN
from apps.backends.slurm.settings import SlurmSettings
from apps.backends.types import Sharing, WorkloadSpec

MINUTE = 60


def sbatch_script(spec: WorkloadSpec, settings: SlurmSettings) -> str:
    if isinstance(spec.manifest, str):
        return spec.manifest
    if spec.manifest is not None:
        raise PermanentBackendError(f"{spec.name}: a Slurm workload's manifest is an sbatch script (text)")
    if not spec.command:
        raise PermanentBackendError(f"{spec.name}: nothing to run (no command and no rendered script)")
    if spec.sharing != Sharing.WHOLE:
        raise PermanentBackendError(f"{spec.name}: {spec.sharing} GPUs need the workloads renderer's script")
    gres = f"gpu:{settings.gres_of(spec.gpu_model)}:{spec.gpus_per_worker}" if spec.gpu_model else None
    options = [
        ("job-name", spec.name),
        ("partition", settings.partition),
        ("account", settings.account),
        ("qos", settings.qos),
        ("nodes", str(spec.workers)),
        ("ntasks-per-node", "1"),
        ("gres", gres or f"gpu:{spec.gpus_per_worker}"),
        ("output", f"{settings.output_dir}/%x-%j.out"),
    ]
    if spec.duration_s:
        # Slurm counts time limits in whole minutes.
        options.append(("time", str(max(1, math.ceil(spec.duration_s / MINUTE)))))
    lines = ["#!/bin/bash"]
    for option, value in options:
        if not value:
            continue
        if not DIRECTIVE_VALUE.fullmatch(value):
            raise PermanentBackendError(str(RenderError(option, f"{value!r} cannot go into an #SBATCH line")))
        lines.append(f"#SBATCH --{option}={value}")
    lines += ["# Rendered by the GPU console: the command is one exactly-quoted argument vector.", "set -eu"]
    lines.append(" ".join(SRUN) + " " + sh_join(list(spec.command)))
    return "\n".join(lines) + "\n"
