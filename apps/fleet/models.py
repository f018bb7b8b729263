"""Clusters, node pools, nodes and GPUs as the console last saw them, plus the GPU model catalog."""

from __future__ import annotations

import enum

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from apps.backends.render.workload.network import Fabric
from apps.core.validators import dns1123_label


class FleetQuerySet(models.QuerySet):
    """Fleet data is not tenant-owned: anyone holding a role may view it; changes need the right action."""

    def for_user(self, user, action: str):
        from apps.accounts.permissions import scope_for

        scope = scope_for(user)
        if action in scope.global_actions:
            return self
        if action == "view" and scope.tenant_actions:
            return self
        return self.none()


class GpuModel(models.Model):
    """A GPU product: memory, the names it appears under in labels and DCGM, and its MIG profiles."""

    name = models.CharField(max_length=60, unique=True, help_text="e.g. H100-80GB-HBM3")
    code = models.CharField(max_length=20, unique=True, validators=[dns1123_label], help_text="short name, e.g. h100")
    vendor = models.CharField(max_length=40, default="NVIDIA")
    memory_mib = models.PositiveIntegerField()
    product_labels = models.JSONField(default=list, blank=True, help_text="values of nvidia.com/gpu.product")
    dcgm_names = models.JSONField(default=list, blank=True, help_text="dcgm-exporter modelName values")
    mig_profiles = models.JSONField(default=list, blank=True, help_text="[profile, compute slices of 7, memory GB]")
    tdp_watts = models.PositiveIntegerField(default=0)
    nvlink = models.BooleanField(default=False)

    objects = FleetQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def mig_supported(self) -> bool:
        return bool(self.mig_profiles)

    @property
    def memory_gb(self) -> int:
        return round(self.memory_mib / 1024)

    def mig_profile(self, name: str) -> tuple[str, int, int] | None:
        for profile in self.mig_profiles:
            if profile[0] == name:
                return tuple(profile)
        return None


class ClusterKind(models.TextChoices):
    KUBERNETES = "kubernetes", _("Kubernetes")
    SLURM = "slurm", _("Slurm")
    SIMULATED = "simulated", _("Simulated")


class ClusterStatus(models.TextChoices):
    UNKNOWN = "unknown", _("Not synced yet")
    OK = "ok", _("OK")
    ERROR = "error", _("Error")


_env_name = RegexValidator(r"^[A-Z_][A-Z0-9_]{0,127}$", "An environment variable name: A-Z, 0-9 and _.")


class Cluster(models.Model):
    """A Kubernetes, Slurm or simulated cluster the console governs.

    `connection` holds non-secret settings (URLs, context names, the simulator's fleet shape). The
    secret (a token, a kubeconfig, a JWT key) is never stored here: `secret_env` names the
    environment variable of the console's processes that holds it, so it is never shown back.
    """

    name = models.CharField(max_length=63, unique=True, validators=[dns1123_label])
    kind = models.CharField(max_length=20, choices=ClusterKind.choices)
    description = models.TextField(blank=True, max_length=2000)
    connection = models.JSONField(default=dict, blank=True)
    secret_env = models.CharField(
        max_length=128,
        blank=True,
        validators=[_env_name],
        help_text="Name of the environment variable holding the secret",
    )
    status = models.CharField(max_length=20, choices=ClusterStatus.choices, default=ClusterStatus.UNKNOWN)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_sync_duration_ms = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    sync_enabled = models.BooleanField(default=True)
    # What the backend needs to report only the changes next sync (Kubernetes: the node and pod lists'
    # resourceVersions to watch from); written with the inventory it describes.
    inventory_cursor = models.JSONField(default=dict, blank=True, editable=False)
    # Set while a sync runs (claimed by compare-and-set) so two workers never sync one cluster at once.
    sync_started_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = FleetQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PoolPurpose(models.TextChoices):
    ONLINE_INFERENCE = "online-inference", _("Online inference")
    BATCH_TRAINING = "batch-training", _("Batch training")
    DEV = "dev", _("Development")


class FabricKind(models.TextChoices):
    """The network between a pool's nodes, as a platform admin declares it (docs/networking.md)."""

    NONE = "none", _("Not declared")
    ETHERNET = "ethernet", _("Ethernet")
    ROCE = "roce", _("RoCE")
    INFINIBAND = "infiniband", _("InfiniBand")


class NodePool(models.Model):
    """A group of like nodes in a cluster, with a purpose, the taints that reserve it, the images it pre-pulls and its
    fabric.

    The fabric settings (declared by a platform admin, `update_pool_fabric`) say how work that spans the pool's
    nodes talks: the RDMA resource its device plugin advertises, NCCL's HCAs, socket interface and RoCE GID
    index, the Multus networks its pods attach to, the Slurm GRES of the fabric (render/workload/network.py).
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pools")
    name = models.CharField(max_length=63, validators=[dns1123_label])
    purpose = models.CharField(max_length=20, choices=PoolPurpose.choices, default=PoolPurpose.BATCH_TRAINING)
    gpu_model = models.ForeignKey(GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    taints = models.JSONField(default=list, blank=True)
    # Images every node of the pool keeps pulled (a DaemonSet on Kubernetes, pushed with the quota objects:
    # apps/backends/render/prepull.py); set with `fleet.services.set_pool_prepull`.
    prepull_images = models.JSONField(default=list, db_default=[], blank=True)
    fabric = models.CharField(
        max_length=20, choices=FabricKind.choices, default=FabricKind.NONE, db_default=FabricKind.NONE
    )
    rdma_resource = models.CharField(
        max_length=253, blank=True, default="", db_default="", help_text="e.g. rdma/ib or nvidia.com/hostdev"
    )
    rdma_per_pod = models.PositiveSmallIntegerField(
        default=1, db_default=1, validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    nccl_ib_hca = models.CharField(max_length=600, blank=True, default="", db_default="", help_text="NCCL_IB_HCA")
    nccl_socket_ifname = models.CharField(
        max_length=600, blank=True, default="", db_default="", help_text="NCCL_SOCKET_IFNAME"
    )
    nccl_ib_gid_index = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(255)], help_text="NCCL_IB_GID_INDEX (RoCE)"
    )
    pod_networks = models.CharField(
        max_length=600, blank=True, default="", db_default="", help_text="Multus networks, [namespace/]name,..."
    )
    slurm_gres = models.CharField(max_length=100, blank=True, default="", db_default="", help_text="e.g. ib:1")

    objects = FleetQuerySet.as_manager()

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="nodepool_unique_per_cluster")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    def fabric_settings(self) -> Fabric:
        """The fabric as the renderers take it."""
        return Fabric(
            kind=self.fabric,
            rdma_resource=self.rdma_resource,
            rdma_per_pod=self.rdma_per_pod,
            nccl_ib_hca=self.nccl_ib_hca,
            nccl_socket_ifname=self.nccl_socket_ifname,
            nccl_ib_gid_index=self.nccl_ib_gid_index,
            pod_networks=self.pod_networks,
            slurm_gres=self.slurm_gres,
            pool=self.name,
        )


FABRIC_FIELDS = (
    "fabric",
    "rdma_resource",
    "rdma_per_pod",
    "nccl_ib_hca",
    "nccl_socket_ifname",
    "nccl_ib_gid_index",
    "pod_networks",
    "slurm_gres",
)


class NodeState(models.TextChoices):
    READY = "ready", _("Ready")
    NOT_READY = "not-ready", _("Not ready")
    DOWN = "down", _("Down")
    VANISHED = "vanished", _("Vanished")
    UNKNOWN = "unknown", _("Unknown")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("node state", "ready"),
            pgettext_lazy("node state", "not-ready"),
            pgettext_lazy("node state", "down"),
            pgettext_lazy("node state", "vanished"),
            pgettext_lazy("node state", "unknown"),
        )
    )


class Node(models.Model):
    """A GPU node as last reported by its backend.

    `gpu_*` counts are kept per node at sync so that capacity and fragmentation are aggregates
    over nodes (one row each), never over GPUs. `fingerprint` lets an unchanged resync skip the row.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    pool = models.ForeignKey(NodePool, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes")
    gpu_model = models.ForeignKey(GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="nodes")
    labels = models.JSONField(default=dict, blank=True)
    taints = models.JSONField(default=list, blank=True)
    unschedulable = models.BooleanField(default=False, help_text="cordoned: no new work is placed here")
    state = models.CharField(max_length=20, choices=NodeState.choices, default=NodeState.UNKNOWN, db_index=True)
    state_reason = models.CharField(max_length=300, blank=True)
    rack = models.CharField(max_length=100, blank=True, db_index=True)
    leaf_switch = models.CharField(max_length=100, blank=True, db_index=True)
    nvlink_domain = models.CharField(max_length=100, blank=True)
    gpu_count = models.PositiveIntegerField(default=0)
    # As Kubernetes reports it: GPUs the scheduler may hand out, unhealthy ones already left out.
    gpu_allocatable = models.PositiveIntegerField(default=0)
    gpu_allocated = models.PositiveIntegerField(default=0)
    gpu_unhealthy = models.PositiveIntegerField(default=0)
    cpu_cores = models.PositiveIntegerField(default=0)
    memory_mib = models.PositiveBigIntegerField(default=0)
    # Allocatable extended resources other than GPUs, as the backend reports them (an RDMA device plugin's
    # {"rdma/ib": 1}): which fabric resources a node really offers, beside what its pool declares.
    extended_resources = models.JSONField(default=dict, blank=True, db_default={})
    fingerprint = models.CharField(max_length=64, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    vanished_at = models.DateTimeField(null=True, blank=True)

    objects = FleetQuerySet.as_manager()

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_per_cluster")]
        indexes = [models.Index(fields=["cluster", "state"], name="node_cluster_state")]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_free(self) -> int:
        """GPUs that new work could use now: allocatable (so healthy), unallocated, on a ready uncordoned node."""
        if self.unschedulable or self.state != NodeState.READY:
            return 0
        return max(self.gpu_allocatable - self.gpu_allocated, 0)


class GpuHealth(models.TextChoices):
    HEALTHY = "healthy", _("Healthy")
    WARNING = "warning", _("Warning")
    UNHEALTHY = "unhealthy", _("Unhealthy")
    UNKNOWN = "unknown", _("Unknown")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("gpu health", "healthy"),
            pgettext_lazy("gpu health", "warning"),
            pgettext_lazy("gpu health", "unhealthy"),
            pgettext_lazy("gpu health", "unknown"),
        )
    )


class Gpu(models.Model):
    """One GPU of a node: identity, model, MIG layout, health and what is on it now."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(validators=[MinValueValidator(0)])
    uuid = models.CharField(max_length=64, db_index=True)
    model = models.ForeignKey(GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    memory_mib = models.PositiveIntegerField(default=0)
    mig_enabled = models.BooleanField(default=False)
    mig_instances = models.JSONField(default=list, blank=True, help_text="[{profile, id, allocated_to}]")
    health = models.CharField(max_length=20, choices=GpuHealth.choices, default=GpuHealth.UNKNOWN, db_index=True)
    health_reason = models.CharField(max_length=300, blank=True)
    allocated_to = models.CharField(
        max_length=300, blank=True, help_text="workload(s) using it, as the backend names them"
    )
    allocated_fraction = models.FloatField(default=0.0, help_text="0 to 1: share of the GPU in use")

    objects = FleetQuerySet.as_manager()

    class Meta:
        ordering = ["node__name", "index"]
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index_per_node"),
            models.CheckConstraint(
                condition=Q(allocated_fraction__gte=0) & Q(allocated_fraction__lte=1), name="gpu_allocated_fraction_0_1"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node.name}/gpu{self.index}"


class FanOutStamp(models.Model):
    """A fan-out's per-cluster task of one kind that has not finished yet (issue 23): `fleet.tasks.fan_out` sends a
    cluster's task only when its last one finished, so a fleet whose workers fall behind runs each cluster's work
    back to back instead of queueing a backlog.

    `kind` is the task's name. Set queued by compare-and-set (`apps.fleet.stamps.claim`), started and finished by the
    task itself (`stamps.running`); a stamp older than FAN_OUT_STAMP_EXPIRY_S without finishing (its message lost,
    its worker killed) no longer holds the cluster back. System bookkeeping, like a cycle's lease: not audited.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=200)
    queued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "kind"], name="fanoutstamp_one_per_cluster_kind")]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.kind}"
