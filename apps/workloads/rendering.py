"""What a workload becomes on its cluster: manifests (Kueue or Volcano) or an sbatch script, for the pages
and for the backend that applies or submits them."""

from __future__ import annotations

from apps.workloads.logs import DEFAULT_SLURM_OUTPUT_DIR
from apps.workloads.models import Workload


def kubernetes_rendering(workload: Workload, spec):
    """The workload's objects on its Kubernetes cluster (RenderError / ValueError when it cannot be rendered).

    The namespace is the queue's first namespace bound on the cluster (else the tenant's slug), the GPU
    resource and node selector follow the model, tolerations the node pool's taints.
    """
    from apps.backends.render.workload import RenderContext, render_kubernetes
    from apps.fleet.models import NodePool
    from apps.tenancy.models import QueueBinding

    binding = QueueBinding.objects.filter(queue=workload.queue, cluster=workload.cluster).first()
    namespaces = (binding.namespaces if binding else []) or [workload.tenant.slug]
    model = workload.gpu_model
    pool = NodePool.objects.filter(cluster=workload.cluster, gpu_model=model).first()
    settings = workload.cluster.connection or {}
    ctx = RenderContext(
        preemptible=workload.tier.preemptible,
        name=workload.backend_name,
        namespace=namespaces[0],
        queue_name=workload.queue.full_name,
        priority_class=workload.tier.name,
        queueing=settings.get("queueing", "kueue"),
        workload_id=str(workload.pk),
        product_label=(model.product_labels or [model.name])[0],
        tolerations=list(pool.taints) if pool else [],
        gpus_per_node=int(settings.get("gpus_per_node", 8)),
    )
    return render_kubernetes(spec, ctx)


def render_workload(workload: Workload) -> tuple[str, str]:
    """(text, error): the rendered objects as YAML or the sbatch script; error when it cannot be rendered."""
    from apps.backends.render.workload import render_slurm
    from apps.workloads.specs import SpecError, parse_spec
    from apps.workloads.submission_context import catalog

    try:
        spec = parse_spec(workload.kind, workload.spec, catalog())
    except SpecError as exc:
        return "", exc.translated()[0]
    try:
        if workload.cluster.kind == "slurm":
            return render_slurm(spec, slurm_context(workload)).script, ""
        return kubernetes_rendering(workload, spec).to_yaml(), ""
    except (ValueError, TypeError) as exc:
        return "", f"{type(exc).__name__}: {exc}"


def slurm_context(workload: Workload, binding=None):
    """Where the workload's sbatch script runs: the queue's Slurm account, the tier's QOS, the cluster's
    partition, GRES type and output directory (connection keys, see apps/backends/slurm/settings.py)."""
    from apps.backends.render.workload import SlurmContext
    from apps.tenancy.models import QueueBinding

    if binding is None:
        binding = QueueBinding.objects.filter(queue=workload.queue, cluster=workload.cluster).first()
    connection = workload.cluster.connection or {}
    gres_types = {code: gres for gres, code in (connection.get("gres_models") or {}).items()}
    return SlurmContext(
        account=(binding.slurm_account if binding else "") or workload.queue.full_name.replace("-", "_"),
        qos=workload.tier.name,
        partition=connection.get("partition") or "gpu",
        gres_type=gres_types.get(workload.gpu_model.code, workload.gpu_model.code),
        output_dir=connection.get("output_dir") or DEFAULT_SLURM_OUTPUT_DIR,
        job_name=workload.backend_name or "",
    )


def slurm_script(workload: Workload, spec) -> str:
    """The sbatch script the Slurm backend submits for `workload` (its parsed `spec`); a script that cannot
    be rendered for this cluster is a permanent backend error (retrying cannot help)."""
    from apps.backends.base import PermanentBackendError
    from apps.backends.render.workload import render_slurm

    try:
        return render_slurm(spec, slurm_context(workload)).script
    except ValueError as exc:
        raise PermanentBackendError(f"cannot render the sbatch script: {exc}") from exc
