"""The sbatch script the backend submits for a WorkloadSpec.

The console passes the workload's typed spec and its render context (account, QOS; see
`apps.backends.render.workload.WorkloadContext`); `render_script` adds this cluster's partition, GRES type
and output directory and renders it with `apps.backends.render.workload.render_slurm` (torchrun, inference
engines, hostile-input-safe quoting). A caller that rendered the script already passes it as the manifest;
it is submitted as it is.
"""

from __future__ import annotations

from apps.backends.base import PermanentBackendError
from apps.backends.render.spec import Spec
from apps.backends.render.workload import RenderedScript, WorkloadContext, render_slurm, slurm_context
from apps.backends.slurm.settings import SlurmSettings
from apps.backends.types import WorkloadSpec


def render_script(spec: Spec, context: WorkloadContext, settings: SlurmSettings) -> RenderedScript:
    """The sbatch script for `spec` on this cluster (RenderError for what Slurm cannot run)."""
    return render_slurm(
        spec,
        slurm_context(
            context,
            partition=settings.partition,
            gres_type=settings.gres_of(context.gpu_model),
            output_dir=settings.output_dir,
            containers=settings.containers,
            volume_dirs=settings.volume_dirs,
            secrets_dir=settings.secrets_dir,
        ),
    )


def sbatch_script(spec: WorkloadSpec, settings: SlurmSettings) -> str:
    if isinstance(spec.manifest, str):
        return spec.manifest
    if spec.manifest is not None:
        raise PermanentBackendError(f"{spec.name}: a Slurm workload's manifest is an sbatch script (text)")
    if spec.source is None or spec.context is None:
        raise PermanentBackendError(
            f"{spec.name}: nothing to run: a Slurm workload needs the console's spec and its render context"
        )
    try:
        return render_script(spec.source, spec.context, settings).script
    except (ValueError, TypeError) as exc:  # RenderError is a ValueError: retrying cannot help
        raise PermanentBackendError(f"cannot render the sbatch script: {exc}") from exc
