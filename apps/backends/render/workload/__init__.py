"""Workload renderers: pure functions from the console's typed spec to what a backend runs, one module per target.

    render_kubernetes(spec, RenderContext(...)) -> RenderedWorkload (objects for server-side apply, caveats)
    render_slurm(spec, SlurmContext(...))       -> RenderedScript (an sbatch script, its main argv)

The spec is an `apps.backends.render.spec` type (the workloads app parses and validates user input into it);
the context says where it runs. The console passes a backend the spec with a `WorkloadContext` (what its
tables say: namespace, queue, tier, GPU product label, taints, Slurm account); the backend adds its own
settings with `kubernetes_context` / `slurm_context` and renders (`Backend.render`, used by `submit`).

Training jobs become a Volcano Job or a Kueue-managed batch/v1 Indexed Job running torchrun, or a Kubeflow Trainer
TrainJob; inference services a Deployment + Service (+ KEDA ScaledObject), or a LeaderWorkerSet when a replica spans
nodes, or a KServe InferenceService (the cluster's `inference_target` / `training_target` settings choose), or with
cache-aware routing / prefill-decode pools the engine's router in front of per-pool Deployments (router.py);
on Slurm an sbatch script with `srun torchrun`, or a long-running engine behind a health check.
Nothing here touches the database or a cluster. RenderError (a ValueError) names what cannot be expressed.
"""

from __future__ import annotations

from apps.backends.render.errors import RenderError
from apps.backends.render.workload.context import (
    RenderContext,
    RenderedScript,
    RenderedWorkload,
    SlurmContext,
    WorkloadContext,
    kubernetes_context,
    slurm_context,
)
from apps.backends.render.workload.kubernetes import render_kubernetes, validation_errors
from apps.backends.render.workload.slurm import render_slurm

__all__ = [
    "RenderContext",
    "RenderError",
    "RenderedScript",
    "RenderedWorkload",
    "SlurmContext",
    "WorkloadContext",
    "kubernetes_context",
    "render_kubernetes",
    "render_slurm",
    "slurm_context",
    "validation_errors",
]
