"""The console's quota model as plain values: the input of the quota renderers and of `Backend.push_quota`; with it
the node pools' image pre-pull lists, pushed alongside.

Built from the database by `apps.tenancy.desired_state.build_desired_state()` (tenancy owns the tables);
the renderers in `apps/backends/render/` turn it into Kubernetes objects (Kueue or Volcano) or Slurm
sacctmgr operations, and each backend pushes what they render. No Django here, so renderers are pure
functions with golden-file tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuModelRef:
    code: str  # console code, e.g. "h100"
    name: str  # e.g. "H100-80GB-HBM3"
    product_label: str  # nvidia.com/gpu.product value, e.g. "NVIDIA-H100-80GB-HBM3"
    slurm_gres_type: str  # GRES type on Slurm nodes, e.g. "h100"
    memory_mib: int = 0  # device memory of one GPU (HAMi and Volcano vGPU memory quotas are in MiB of it)


@dataclass(frozen=True)
class TierSpec:
    name: str  # e.g. "online-inference"
    value: int  # priority value, e.g. 1000
    preemptible: bool
    may_borrow: bool
    description: str = ""


@dataclass(frozen=True)
class QuotaLine:
    """One queue's quota for one GPU model. None means: borrow unlimited / lend all of the unused guarantee."""

    gpu_model: str  # GpuModelRef.code
    guaranteed: int
    borrow_limit: int | None = None
    lend_limit: int | None = None
    weight: float = 1.0
    per_user_limit: int | None = None


@dataclass(frozen=True)
class TenantSpec:
    slug: str
    name: str
    parent: str | None  # parent slug; None for an organization
    # Sum of the tenant's own queues' and descendants' guarantees per model (informational for renderers).
    guaranteed: dict[str, int] = field(default_factory=dict)
    weight: float = 1.0


@dataclass(frozen=True)
class QueueSpec:
    tenant: str  # tenant slug
    name: str  # queue name, DNS-1123, unique within the tenant
    namespaces: tuple[str, ...] = ()  # Kubernetes namespaces bound on this cluster
    slurm_account: str = ""  # Slurm account bound on this cluster
    quotas: tuple[QuotaLine, ...] = ()
    users: tuple[str, ...] = ()  # usernames allowed to submit (Slurm user associations)

    @property
    def full_name(self) -> str:
        """Cluster-unique name for cluster-scoped objects: "<tenant>-<queue>"."""
        return f"{self.tenant}-{self.name}"


@dataclass(frozen=True)
class NodeRef:
    """One node of the cluster's inventory, as far as the quota renderers need it (tenancy copies the fleet's
    Node rows): its labels place it in a GPU pool (see `apps.backends.render.pools`), its size gives the cpu
    and memory that come with one of its GPUs."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    gpus: int = 0  # GPUs as the inventory counts them (physical ones where the sharing labels say so)
    cpu_cores: int = 0  # allocatable
    memory_mib: int = 0  # allocatable


# The node labels of each topology level above the node, coarsest first: the defaults of the cluster's
# `topology_labels` connection setting.
LEVEL_LABELS = {"rack": "gpu-console/rack", "leaf": "gpu-console/leaf-switch", "nvlink": "nvidia.com/gpu.clique"}


def level_labels(setting: object) -> tuple[tuple[str, str], ...]:
    """(level, node label) coarsest first: the defaults with a `topology_labels` setting's (an invalid setting is
    refused where it is saved, topology_label_errors; here its usable entries count)."""
    labels = dict(LEVEL_LABELS)
    if isinstance(setting, dict):
        labels.update({k: v for k, v in setting.items() if k in labels and isinstance(v, str) and v})
    return tuple(labels.items())


@dataclass(frozen=True)
class QuotaSettings:
    """The cluster's connection settings that change what its quota objects must cover.

    * `kueue_excluded_resources`: the prefixes the site's Kueue Configuration lists in
      `resources.excludeResourcePrefixes` (Kueue ignores those resources; by default it ignores none and
      refuses a workload requesting a resource its ClusterQueue does not cover), e.g. ("cpu", "memory").
    * `hami_node_labels`: the labels of the nodes HAMi's device plugin runs on (its chart's
      devicePlugin.nvidiaNodeSelector, default gpu=on); empty: the cluster has no HAMi pool.
    * `hami_split_count`: vGPUs per GPU on those nodes (HAMi's deviceSplitCount, default 10).
    * `volcano_vgpu`: Volcano's own vGPU device plugin runs (volcano.sh/vgpu-* resources).
    * `volcano_per_model_resources`: the nodes advertise GPUs per model as nvidia.com/gpu-<model code> (a
      renamed device-plugin resource), instead of the stock nvidia.com/gpu.
    """

    kueue_excluded_resources: tuple[str, ...] = ()
    hami_node_labels: tuple[tuple[str, str], ...] = ()
    hami_split_count: int = 10
    volcano_vgpu: bool = False
    volcano_per_model_resources: bool = False
    # Who keeps gangs within a topology level (connection `topology_scheduler`): "kueue-tas" adds a Kueue
    # Topology per GPU model and its topologyName on the model's whole-GPU flavor (render/topology.py).
    topology_scheduler: str = "console"
    # (level, node label) of rack, leaf and NVLink domain, coarsest first (connection `topology_labels`).
    topology_levels: tuple[tuple[str, str], ...] = tuple(LEVEL_LABELS.items())

    @classmethod
    def from_connection(cls, connection: dict) -> QuotaSettings:
        """The settings from a cluster's `connection` dict. Values of the wrong type are passed on as they are:
        the renderers check them and refuse with the setting's name (`check_settings` in pools.py)."""
        labels = connection.get("hami_node_labels") or {}
        excluded = connection.get("kueue_excluded_resources") or ()
        return cls(
            kueue_excluded_resources=tuple(excluded) if isinstance(excluded, list | tuple) else excluded,
            hami_node_labels=tuple(sorted(labels.items())) if isinstance(labels, dict) else labels,
            hami_split_count=connection.get("hami_split_count", 10),
            volcano_vgpu=bool(connection.get("volcano_vgpu", False)),
            volcano_per_model_resources=bool(connection.get("volcano_per_model_resources", False)),
            topology_scheduler=connection.get("topology_scheduler") or "console",
            topology_levels=level_labels(connection.get("topology_labels")),
        )


@dataclass(frozen=True)
class PrepullPool:
    """A node pool whose nodes keep images pulled ahead of the work that runs them (a DaemonSet on Kubernetes, the
    simulator's image cache): its nodes are those with `node_labels`, its `taints` are tolerated."""

    name: str  # the pool's name, e.g. "h100-serve"
    images: tuple[str, ...]
    node_labels: tuple[tuple[str, str], ...] = ()  # what selects the pool's nodes; empty: the pool has no such label
    taints: tuple[dict, ...] = ()  # {key, value, effect}, as the pool's nodes all carry them


@dataclass(frozen=True)
class DesiredState:
    """Everything one cluster should hold for the console's tenants, queues, quotas and tiers."""

    cluster: str
    tenants: tuple[TenantSpec, ...]
    queues: tuple[QueueSpec, ...]
    tiers: tuple[TierSpec, ...]
    gpu_models: tuple[GpuModelRef, ...]
    queueing: str = "kueue"  # Kubernetes clusters: "kueue" or "volcano"; Slurm ignores it
    nodes: tuple[NodeRef, ...] = ()  # the cluster's inventory (Kubernetes: pools, cpu and memory per GPU)
    settings: QuotaSettings = field(default_factory=QuotaSettings)
    prepull: tuple[PrepullPool, ...] = ()  # pools with images to keep on their nodes
