from rest_framework import serializers

from apps.core.api.serializers import StrictModelSerializer, StrictSerializer
from apps.fleet.models import FABRIC_FIELDS, Cluster, ClusterKind, FabricKind, Gpu, GpuModel, Node, NodePool
from apps.fleet.owners import WorkloadNames


class GpuModelSerializer(serializers.ModelSerializer):
    mig_supported = serializers.BooleanField(read_only=True)

    class Meta:
        model = GpuModel
        fields = [
            "id",
            "name",
            "code",
            "vendor",
            "memory_mib",
            "product_labels",
            "dcgm_names",
            "mig_supported",
            "mig_profiles",
            "tdp_watts",
            "nvlink",
        ]
        read_only_fields = fields


class ClusterSerializer(StrictModelSerializer):
    kind = serializers.ChoiceField(choices=ClusterKind.choices)
    connection = serializers.DictField(
        required=False,
        help_text='Non-secret settings. For kind "simulated", the fleet shape: '
        '{"nodes": 32, "gpus_per_node": 8, "models": {"h100": 0.5, "a100": 0.5}, "seed": 1}. Kubernetes: '
        '"queueing" (kueue | volcano), "inference_target" (deployment | lws | kserve, default deployment), '
        '"training_target" (kueue-job | volcano | trainjob, default the queueing system\'s own), '
        '"trainjob_runtime" (default torch-distributed); see docs/targets.md',
    )
    node_count = serializers.IntegerField(read_only=True)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "kind",
            "description",
            "connection",
            "secret_env",
            "sync_enabled",
            "status",
            "last_sync_at",
            "last_sync_duration_ms",
            "last_error",
            "last_error_at",
            "node_count",
            "created_at",
            "reason",
        ]
        read_only_fields = [
            "id",
            "status",
            "last_sync_at",
            "last_sync_duration_ms",
            "last_error",
            "last_error_at",
            "created_at",
        ]
        extra_kwargs = {"name": {"validators": []}}


class ClusterUpdateSerializer(StrictSerializer):
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    connection = serializers.DictField(required=False)
    secret_env = serializers.CharField(required=False, allow_blank=True, max_length=128)
    sync_enabled = serializers.BooleanField(required=False)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class ClusterSyncSerializer(StrictSerializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class PoolSerializer(serializers.ModelSerializer):
    """A node pool as the inventory sync found it, the images its nodes keep pulled, and its fabric
    (docs/networking.md)."""

    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="code", read_only=True)
    prepull_images = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = NodePool
        fields = [
            "id",
            "cluster",
            "name",
            "purpose",
            "gpu_model",
            "taints",
            "prepull_images",
            *FABRIC_FIELDS,
        ]
        read_only_fields = fields


class PoolPrepullSerializer(StrictSerializer):
    images = serializers.ListField(
        child=serializers.CharField(max_length=512, allow_blank=False),
        max_length=20,
        help_text="Pinned image references the pool's nodes keep pulled ([] stops pre-pulling); the cluster gets "
        "them with its next quota push (POST /api/v1/clusters/{name}/quota-push/)",
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class PoolFabricSerializer(StrictSerializer):
    """A node pool's fabric: each field given replaces the pool's; the result is checked as a whole."""

    fabric = serializers.ChoiceField(choices=FabricKind.choices, required=False)
    rdma_resource = serializers.CharField(
        required=False, allow_blank=True, max_length=253, help_text="The RDMA device plugin's resource, e.g. rdma/ib"
    )
    rdma_per_pod = serializers.IntegerField(required=False, min_value=1, max_value=64)
    nccl_ib_hca = serializers.CharField(
        required=False, allow_blank=True, max_length=600, help_text="NCCL_IB_HCA, e.g. =mlx5_0:1,mlx5_1:1"
    )
    nccl_socket_ifname = serializers.CharField(
        required=False, allow_blank=True, max_length=600, help_text="NCCL_SOCKET_IFNAME, e.g. =eth0"
    )
    nccl_ib_gid_index = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=255, help_text="NCCL_IB_GID_INDEX (RoCE)"
    )
    pod_networks = serializers.CharField(
        required=False, allow_blank=True, max_length=600, help_text="Multus networks: [namespace/]name, comma-separated"
    )
    slurm_gres = serializers.CharField(
        required=False, allow_blank=True, max_length=100, help_text="Slurm: the fabric's GRES, e.g. ib:1"
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="code", read_only=True)
    gpu_free = serializers.IntegerField(read_only=True)

    class Meta:
        model = Node
        fields = [
            "id",
            "cluster",
            "name",
            "pool",
            "gpu_model",
            "state",
            "state_reason",
            "unschedulable",
            "rack",
            "leaf_switch",
            "nvlink_domain",
            "gpu_count",
            "gpu_allocatable",
            "gpu_allocated",
            "gpu_unhealthy",
            "gpu_free",
            "cpu_cores",
            "memory_mib",
            "extended_resources",
            "labels",
            "taints",
            "last_seen_at",
            "vanished_at",
        ]
        read_only_fields = fields


class GpuListSerializer(serializers.ListSerializer):
    def to_representation(self, data):
        gpus = list(data.all() if hasattr(data, "all") else data)
        request = self.context.get("request")
        # Whose work is on the page's GPUs: one lookup for the whole page.
        self.context["workload_names"] = WorkloadNames.of_gpus(getattr(request, "user", None), gpus)
        return super().to_representation(gpus)


class GpuSerializer(serializers.ModelSerializer):
    """A GPU; what runs on it is named only where the user may view the work's tenant (apps/fleet/owners.py)."""

    node = serializers.SlugRelatedField(slug_field="name", read_only=True)
    cluster = serializers.CharField(source="node.cluster.name", read_only=True)
    model = serializers.SlugRelatedField(slug_field="code", read_only=True)

    class Meta:
        model = Gpu
        fields = [
            "id",
            "cluster",
            "node",
            "index",
            "uuid",
            "model",
            "memory_mib",
            "mig_enabled",
            "mig_instances",
            "health",
            "health_reason",
            "allocated_to",
            "allocated_fraction",
        ]
        read_only_fields = fields
        list_serializer_class = GpuListSerializer

    def to_representation(self, instance):
        data = super().to_representation(instance)
        names = self.context.get("workload_names")
        if names is None:
            request = self.context.get("request")
            names = WorkloadNames.of_gpus(getattr(request, "user", None), [instance])
        data["allocated_to"] = names.allocated_to(instance)
        data["mig_instances"] = names.mig_instances(instance)
        return data


class CapacitySerializer(serializers.Serializer):
    gpu_model = serializers.CharField()
    nodes = serializers.IntegerField()
    total = serializers.IntegerField()
    allocatable = serializers.IntegerField()
    allocated = serializers.IntegerField()
    free = serializers.IntegerField()
    cordoned = serializers.IntegerField()
    unhealthy = serializers.IntegerField()
    gpus_per_node = serializers.IntegerField()
    whole_free_nodes = serializers.IntegerField()
    largest_gang_leaf = serializers.IntegerField()
    largest_gang_leaf_switch = serializers.CharField()
    largest_free_on_one_node = serializers.IntegerField()
    stranded = serializers.IntegerField()
    fragmentation = serializers.FloatField()
    largest_gang_text = serializers.CharField()
