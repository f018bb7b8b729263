"""Workload renderers: pure functions from a spec to what a backend runs, one module per target.

    render_kubernetes(spec, RenderContext(...)) -> RenderedWorkload (objects for server-side apply, caveats)
    render_slurm(spec, SlurmContext(...))       -> RenderedScript (an sbatch script, its main argv)

Training jobs become a Volcano Job or a Kueue-managed batch/v1 Indexed Job running torchrun; inference
services a Deployment + Service (+ KEDA ScaledObject), or a LeaderWorkerSet when a replica spans nodes;
on Slurm an sbatch script with `srun torchrun`, or a long-running engine behind a health check.
Nothing here touches the database or a cluster. RenderError (a ValueError) names what cannot be expressed.
"""

from __future__ import annotations

from apps.backends.render.errors import RenderError
from apps.backends.render.workload.context import RenderContext, RenderedScript, RenderedWorkload, SlurmContext
from apps.backends.render.workload.kubernetes import render_kubernetes, validation_errors
from apps.backends.render.workload.slurm import render_slurm

__all__ = [
    "RenderContext",
    "RenderError",
    "RenderedScript",
    "RenderedWorkload",
    "SlurmContext",
    "render_kubernetes",
    "render_slurm",
    "validation_errors",
]
