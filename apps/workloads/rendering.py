"""What a workload becomes on its cluster: manifests (Kueue or Volcano) or an sbatch script, for the pages
and, on Kubernetes, for the backend that applies them."""

from __future__ import annotations

from apps.workloads.logs import DEFAULT_SLURM_OUTPUT_DIR
from apps.workloads.models import Workload


def kubernetes_rendering(workload: Workload, spec):
    """The workload's objects on its Kubernetes cluster (RenderError / ValueError when it cannot be rendered).

    The namespace is the queue's first namespace bound on the cluster (else the tenant's slug), the GPU
    resource and node selector follow the model, tolerations the node pool's taints.
    """
    from apps.fleet.models import NodePool
    from apps.tenancy.models import QueueBinding
    from apps.workloads.render import RenderContext, render_kubernetes

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
    from apps.tenancy.models import QueueBinding
    from apps.workloads.render import SlurmContext, render_slurm
    from apps.workloads.services import catalog
    from apps.workloads.specs import SpecError, parse_spec

    try:
        spec = parse_spec(workload.kind, workload.spec, catalog())
    except SpecError as exc:
        return "", str(exc)
    try:
        if workload.cluster.kind == "slurm":
            binding = QueueBinding.objects.filter(queue=workload.queue, cluster=workload.cluster).first()
            ctx = SlurmContext(
                account=(binding.slurm_account if binding else "") or workload.queue.full_name.replace("-", "_"),
                qos=workload.tier.name,
                partition=(workload.cluster.connection or {}).get("partition", "gpu"),
                gres_type=workload.gpu_model.code,
                output_dir=(workload.cluster.connection or {}).get("output_dir", DEFAULT_SLURM_OUTPUT_DIR),
            )
            return render_slurm(spec, ctx).script, ""
        return kubernetes_rendering(workload, spec).to_yaml(), ""
    except (ValueError, TypeError) as exc:
        return "", f"{type(exc).__name__}: {exc}"
