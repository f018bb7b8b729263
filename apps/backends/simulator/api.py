"""REST API of the simulator: inject and clear faults, move simulated time (on-call and platform admins)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.permissions import scope_for
from apps.backends.simulator import services
from apps.backends.simulator.faults import FaultKind
from apps.backends.simulator.models import SimCluster, SimFault
from apps.core.api.serializers import StrictSerializer
from apps.core.errors import NotFound


class FaultSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="sim.cluster.name", read_only=True)
    gpu = serializers.IntegerField(source="gpu_index", read_only=True, allow_null=True)
    active = serializers.BooleanField(read_only=True)

    class Meta:
        model = SimFault
        fields = ["id", "cluster", "node", "gpu", "kind", "reason", "active", "injected_at", "cleared_at"]
        read_only_fields = fields


class FaultInjectSerializer(StrictSerializer):
    cluster = serializers.CharField(max_length=63)
    node = serializers.CharField(max_length=253)
    kind = serializers.ChoiceField(choices=[kind.value for kind in FaultKind])
    gpu = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=15)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)


class AdvanceSerializer(StrictSerializer):
    cluster = serializers.CharField(max_length=63)
    minutes = serializers.FloatField(min_value=0.001)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)


def _may_view(user) -> bool:
    """Whether `user` sees fleet data, simulated clusters included: anyone holding a role (as fleet's querysets)."""
    scope = scope_for(user)
    return "view" in scope.global_actions or bool(scope.tenant_actions)


def _cluster(user, name: str):
    """The simulated cluster named `name` (the fleet Cluster the services take), found through its simulation."""
    sim = SimCluster.objects.select_related("cluster").filter(cluster__name=name).first() if _may_view(user) else None
    if sim is None:
        raise NotFound(f"No simulated cluster {name!r}.", {"cluster": f"No simulated cluster {name!r}."})
    return sim.cluster


class FaultViewSet(mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet):
    """Faults injected into simulated clusters. POST injects, DELETE clears (`?reason=`)."""

    serializer_class = FaultSerializer
    filterset_fields = ["node", "kind"]

    def get_queryset(self):
        if not _may_view(self.request.user):
            return SimFault.objects.none()
        qs = SimFault.objects.select_related("sim__cluster").order_by("-id")
        if "cluster" in self.request.query_params:
            qs = qs.filter(sim__cluster__name=self.request.query_params["cluster"])
        if self.request.query_params.get("active") in {"true", "1"}:
            qs = qs.filter(cleared_at__isnull=True)
        return qs

    @extend_schema(request=FaultInjectSerializer, responses={201: FaultSerializer})
    def create(self, request, *args, **kwargs):
        body = FaultInjectSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        fault = services.inject_fault(
            request.user,
            _cluster(request.user, data["cluster"]),
            data["node"],
            data["kind"],
            data.get("gpu"),
            data.get("reason", ""),
        )
        return Response(FaultSerializer(fault).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: FaultSerializer})
    def destroy(self, request, *args, **kwargs):
        fault = services.clear_fault(request.user, self.get_object(), request.query_params.get("reason", ""))
        return Response(FaultSerializer(fault).data)


class AdvanceView(APIView):
    """Move a simulated cluster's clock forward by `minutes`."""

    @extend_schema(request=AdvanceSerializer, responses={200: None})
    def post(self, request):
        body = AdvanceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        sim = services.advance_time(
            request.user, _cluster(request.user, data["cluster"]), data["minutes"], data.get("reason", "")
        )
        return Response({"cluster": data["cluster"], "sim_time": sim.sim_now().isoformat()})
