"""What a workload becomes on its cluster: the render context from the console's tables, and its rendering
(manifests for Kueue or Volcano, or an sbatch script) as the workload page shows it.

`render_context` is the one place that reads the tables rendering needs; the outbox passes the same context
with the spec to `Backend.submit`, and the page asks `Backend.render` with it, so both get the same result.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.backends.base import BackendError
from apps.backends.registry import backend_class, get_backend
from apps.backends.render.desired import QuotaSettings
from apps.backends.render.pools import offered
from apps.backends.render.titles import workload_title
from apps.backends.render.topology import tas_levels
from apps.backends.render.workload import WorkloadContext
from apps.backends.render.workload.network import Fabric
from apps.fleet.models import NodePool
from apps.tenancy.desired_state import gpu_node_refs, model_ref
from apps.tenancy.models import QueueBinding
from apps.workloads.models import Workload


@dataclass(frozen=True)
class RenderTables:
    """What `render_context` reads from the tables for a workload's queue on its cluster: the queue's binding there
    (its namespaces and Slurm account) and the taints and fabric of the cluster's node pool of the GPU model (None:
    no pool). A submission reads them with its context (apps/workloads/submission_context.py) and passes them in."""

    namespaces: list
    slurm_account: str
    taints: list | None
    fabric: Fabric | None = None


def render_tables(workload: Workload) -> RenderTables:
    """`RenderTables` for `workload`, read from the tables (two queries)."""
    binding = QueueBinding.objects.filter(queue=workload.queue, cluster=workload.cluster).first()
    pool = NodePool.objects.filter(cluster=workload.cluster, gpu_model=workload.gpu_model).first()
    return RenderTables(
        namespaces=binding.namespaces if binding else [],
        slurm_account=binding.slurm_account if binding else "",
        taints=pool.taints if pool else None,
        fabric=pool.fabric_settings() if pool else None,
    )


def render_context(workload: Workload, tables: RenderTables | None = None) -> WorkloadContext:
    """Where `workload` runs: the name of its queue's objects on the cluster, the queue's binding there (the first
    namespace, else the tenant's slug; the Slurm account, else one derived from the queue's name), the tier, the
    GPU model's product label and the taints and fabric of the cluster's node pool of that model; on Kubernetes, the
    model's GPU pools the last inventory sync saw (a shared GPU outside them is refused by the renderer, see
    `gpu_pools`). `tables`: what the tables say, when the caller has read it already (else read here)."""
    tables = tables or render_tables(workload)
    namespaces = tables.namespaces or [workload.tenant.slug]
    model = workload.gpu_model
    return WorkloadContext(
        name=workload.backend_name,
        workload_id=str(workload.pk),
        # "<tenant>-<queue>": the renderers derive the names of the queue's objects on the cluster from it
        # (Kueue ClusterQueue and LocalQueue, Volcano pool leaves) as the quota renderers do, shortened alike.
        queue=workload.queue.full_name,
        tier=workload.tier.name,
        preemptible=workload.tier.preemptible,
        gpu_model=model.code,
        product_label=(model.product_labels or [model.name])[0],
        namespace=namespaces[0],
        tolerations=list(tables.taints) if tables.taints is not None else [],
        slurm_account=tables.slurm_account or workload.queue.full_name.replace("-", "_"),
        gpu_pools=_gpu_pools(workload) if _needs_pools(workload) else None,
        topology_levels=_topology_levels(workload) if _needs_levels(workload) else None,
        fabric=tables.fabric,
    )


def _needs_levels(workload: Workload) -> bool:
    """Only a training job with a topology level depends on the levels of its model's Kueue Topology, and only on
    a real Kubernetes cluster whose topology scheduler is Kueue's TAS."""
    topology = (workload.spec or {}).get("topology", "any")
    connection = workload.cluster.connection or {}
    return (
        workload.kind == "training"
        and topology not in ("any", None)
        and connection.get("topology_scheduler") == "kueue-tas"
        and backend_class(workload.cluster.kind).gpu_pools_from_inventory
    )


def _topology_levels(workload: Workload) -> tuple[str, ...] | None:
    """The node labels of the model's Kueue Topology on the workload's cluster, as the quota push renders it from
    the inventory (render/topology.py); None when the cluster's settings cannot be read."""
    try:
        settings = QuotaSettings.from_connection(workload.cluster.connection or {})
        return tas_levels(model_ref(workload.gpu_model), gpu_node_refs(workload.cluster), settings)
    except (ValueError, TypeError):
        return None


def _needs_pools(workload: Workload) -> bool:
    """Only a shared GPU (time-slice, MPS, MIG, HAMi) depends on the cluster's pools, and only on real Kubernetes
    clusters: whole GPUs skip reading the cluster's nodes."""
    sharing = (workload.spec or {}).get("sharing") or {}
    shared = isinstance(sharing, dict) and sharing.get("mode", "whole") != "whole"
    return shared and backend_class(workload.cluster.kind).gpu_pools_from_inventory


def _gpu_pools(workload: Workload) -> tuple[str, ...] | None:
    """The model's pools on the workload's Kubernetes cluster, from its nodes' GPU Feature Discovery labels;
    None when the cluster's settings cannot be read (the quota push names them)."""
    try:
        settings = QuotaSettings.from_connection(workload.cluster.connection or {})
        return offered(model_ref(workload.gpu_model), gpu_node_refs(workload.cluster), settings)
    except ValueError:
        return None


def rendering_title(workload: Workload) -> str:
    """What the workload page calls its rendering on this cluster ("Manifests", "sbatch script")."""
    return workload_title(backend_class(workload.cluster.kind).renderer)


def render_workload(workload: Workload) -> tuple[str, str]:
    """(text, error): the rendered objects as YAML or the sbatch script; error when it cannot be rendered."""
    from apps.workloads.specs import SpecError, parse_spec
    from apps.workloads.submission_context import catalog

    try:
        spec = parse_spec(workload.kind, workload.spec, catalog())
    except SpecError as exc:
        return "", exc.translated()[0]
    try:
        return get_backend(workload.cluster).render(spec, render_context(workload)).text, ""
    except BackendError as exc:
        return "", str(exc)
    except (ValueError, TypeError) as exc:
        return "", f"{type(exc).__name__}: {exc}"
