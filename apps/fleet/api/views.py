from django.db.models import Count, Q
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.views import ScopedReadOnlyViewSet, ScopedViewSetMixin
from apps.fleet import services
from apps.fleet.api.serializers import (
    CapacitySerializer,
    ClusterSerializer,
    ClusterSyncSerializer,
    ClusterUpdateSerializer,
    GpuModelSerializer,
    GpuSerializer,
    NodeSerializer,
    PoolFabricSerializer,
    PoolPrepullSerializer,
    PoolSerializer,
)
from apps.fleet.capacity import capacity_by_model
from apps.fleet.filtersets import ClusterFilterSet, GpuFilterSet, GpuModelFilterSet, NodeFilterSet, PoolFilterSet
from apps.fleet.models import Cluster, Gpu, GpuModel, Node, NodePool, NodeState
from apps.operations.api.serializers import OperationSerializer
from apps.operations.services import start_operation


class ClusterViewSet(ScopedViewSetMixin, viewsets.ModelViewSet):
    """Clusters the console governs. Platform admins add Kubernetes and Slurm clusters here (simulated ones
    with `manage.py simulate create` or the simulator API); on-call may test the connection and sync now."""

    model = Cluster
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet
    lookup_field = "name"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        nodes = Count("nodes", filter=~Q(nodes__state=NodeState.VANISHED))
        # GROUP BY drops the model's default ordering: say it again, or pages could repeat or skip clusters.
        return super().get_queryset().annotate(node_count=nodes).order_by("name")

    def perform_create(self, serializer):
        data = dict(serializer.validated_data)
        serializer.instance = services.create_cluster(self.request.user, **data)
        serializer.instance.node_count = 0

    @extend_schema(request=ClusterUpdateSerializer, responses=ClusterSerializer)
    def partial_update(self, request, *args, **kwargs):
        body = ClusterUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        cluster = services.update_cluster(request.user, self.get_object(), **body.validated_data)
        return Response(ClusterSerializer(self.get_queryset().get(pk=cluster.pk)).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        services.delete_cluster(request.user, self.get_object(), reason=request.query_params.get("reason", ""))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=None,
        responses=inline_serializer(
            "ConnectionReport",
            {
                "ok": serializers.BooleanField(),
                "server_version": serializers.CharField(),
                "message": serializers.CharField(),
                "features": serializers.DictField(),
                "notes": serializers.ListField(),
            },
        ),
    )
    @action(detail=True, methods=["post"], url_path="test-connection")
    def test_connection(self, request, name=None):
        report = services.check_connection(request.user, self.get_object())
        return Response(
            {
                "ok": report.ok,
                "server_version": report.server_version,
                "message": report.message,
                "features": report.features,
                "notes": report.notes,
            }
        )

    @extend_schema(request=ClusterSyncSerializer, responses={202: OperationSerializer})
    @action(detail=True, methods=["post"])
    def sync(self, request, name=None):
        body = ClusterSyncSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        cluster = self.get_object()
        operation = start_operation(
            request.user,
            "fleet.sync",
            target=cluster,
            params={"cluster_id": cluster.pk},
            reason=body.validated_data["reason"],
        )
        return Response(OperationSerializer(operation).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=ClusterSyncSerializer, responses={202: OperationSerializer})
    @action(detail=True, methods=["post"], url_path="quota-push")
    def quota_push(self, request, name=None):
        """Push the cluster's desired state now (quotas, queues, tiers and its pools' image pre-pulls): the same
        operation as the cluster page's "Push quota"."""
        body = ClusterSyncSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        cluster = self.get_object()
        operation = start_operation(
            request.user,
            "tenancy.quota-push",
            target=cluster,
            params={"cluster_id": cluster.pk, "dry_run": False},
            reason=body.validated_data["reason"],
        )
        return Response(OperationSerializer(operation).data, status=status.HTTP_202_ACCEPTED)


class PoolViewSet(ScopedReadOnlyViewSet):
    """Node pools as the inventory sync found them. Platform admins set the images a pool pre-pulls and declare its
    fabric (PATCH): how work that spans the pool's nodes talks (docs/networking.md)."""

    model = NodePool
    serializer_class = PoolSerializer
    filterset_class = PoolFilterSet
    select_related = ("cluster", "gpu_model")

    @extend_schema(request=PoolPrepullSerializer, responses=PoolSerializer)
    @action(detail=True, methods=["put"])
    def prepull(self, request, pk=None):
        body = PoolPrepullSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        pool = services.set_pool_prepull(
            request.user, self.get_object(), body.validated_data["images"], reason=body.validated_data["reason"]
        )
        return Response(PoolSerializer(pool).data)

    @extend_schema(request=PoolFabricSerializer, responses=PoolSerializer)
    def partial_update(self, request, *args, **kwargs):
        body = PoolFabricSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        changes = dict(body.validated_data)
        pool = services.update_pool_fabric(request.user, self.get_object(), reason=changes.pop("reason"), **changes)
        return Response(PoolSerializer(pool).data)


class NodeViewSet(ScopedReadOnlyViewSet):
    """GPU nodes as last synced, filterable by cluster, pool, model, state, health and rack."""

    model = Node
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet
    select_related = ("cluster", "pool", "gpu_model")
    ordering_fields = ["name", "gpu_allocated", "gpu_unhealthy", "last_seen_at"]


class GpuViewSet(ScopedReadOnlyViewSet):
    model = Gpu
    serializer_class = GpuSerializer
    filterset_class = GpuFilterSet
    select_related = ("node__cluster", "model")
    # Not `allocated_to`: sorting by the names that are masked would tell them (apps/fleet/owners.py).
    ordering_fields = ["node__name", "index", "health", "allocated_fraction", "memory_mib"]


class GpuModelViewSet(ScopedReadOnlyViewSet):
    """The GPU model catalog."""

    model = GpuModel
    serializer_class = GpuModelSerializer
    filterset_class = GpuModelFilterSet
    pagination_class = None


class CapacityView(APIView):
    """Capacity per GPU model: totals, free, cordoned, unhealthy, and the largest gang that still fits."""

    @extend_schema(
        parameters=[OpenApiParameter("cluster", str, description="cluster name")],
        responses=CapacitySerializer(many=True),
    )
    def get(self, request):
        nodes = Node.objects.for_user(request.user, "view")
        cluster = request.query_params.get("cluster")
        if cluster:
            nodes = nodes.filter(cluster__name=cluster)
        return Response(CapacitySerializer(capacity_by_model(nodes), many=True).data)
