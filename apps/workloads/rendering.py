"""What a workload becomes on its cluster: manifests (Kueue or Volcano) or an sbatch script, for the pages."""

from __future__ import annotations

from apps.workloads.logs import DEFAULT_SLURM_OUTPUT_DIR
from apps.workloads.models import Workload


def render_workload(workload: Workload) -> tuple[str, str]:
    """(text, error): the rendered objects as YAML or the sbatch script; error when it cannot be rendered."""
    from apps.tenancy.models import QueueBinding
    from apps.workloads.render import RenderContext, SlurmContext, render_kubernetes, render_slurm
    from apps.workloads.services import catalog
    from apps.workloads.specs import SpecError, parse_spec

    try:
        spec = parse_spec(workload.kind, workload.spec, catalog())
    except SpecError as exc:
        return "", str(exc)
    binding = QueueBinding.objects.filter(queue=workload.queue, cluster=workload.cluster).first()
    model = workload.gpu_model
    try:
        if workload.cluster.kind == "slurm":
            ctx = SlurmContext(
                account=(binding.slurm_account if binding else "") or workload.queue.full_name.replace("-", "_"),
                qos=workload.tier.name,
                partition=(workload.cluster.connection or {}).get("partition", "gpu"),
                gres_type=model.code,
                output_dir=(workload.cluster.connection or {}).get("output_dir", DEFAULT_SLURM_OUTPUT_DIR),
            )
            return render_slurm(spec, ctx).script, ""
        namespaces = (binding.namespaces if binding else []) or [workload.tenant.slug]
        from apps.fleet.models import NodePool

        pool = NodePool.objects.filter(cluster=workload.cluster, gpu_model=model).first()
        pool_taints = list(pool.taints) if pool else []
        ctx = RenderContext(
            preemptible=workload.tier.preemptible,
            name=workload.backend_name,
            namespace=namespaces[0],
            queue_name=workload.queue.full_name,
            priority_class=workload.tier.name,
            queueing=(workload.cluster.connection or {}).get("queueing", "kueue"),
            workload_id=str(workload.pk),
            product_label=(model.product_labels or [model.name])[0],
            tolerations=pool_taints,
            gpus_per_node=8,
        )
        return render_kubernetes(spec, ctx).to_yaml(), ""
    except (ValueError, TypeError) as exc:
        return "", f"{type(exc).__name__}: {exc}"
