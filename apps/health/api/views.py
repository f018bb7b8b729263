from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.accounts.models import Tenant
from apps.core.api.views import ScopedReadOnlyViewSet, ScopedViewSetMixin
from apps.core.errors import NotFound
from apps.fleet.api.views import NodeViewSet as FleetNodeViewSet
from apps.fleet.models import Cluster, NodePool
from apps.health.api.serializers import (
    ChannelCreateSerializer,
    ChannelSerializer,
    ImpactSerializer,
    IncidentDetailSerializer,
    IncidentSerializer,
    IsolationPolicySerializer,
    IsolationPolicySetSerializer,
    NodeActionSerializer,
    RuleSerializer,
    RuleTuneSerializer,
    TelemetrySourceConfigureSerializer,
    TelemetrySourceSerializer,
    TransitionSerializer,
)
from apps.health.filtersets import IncidentFilterSet
from apps.health.models import Incident, IsolationPolicy, Rule, TelemetrySource
from apps.health.services import config, runbook
from apps.health.services.incidents import transition_incident
from apps.health.services.rulesets import active_ruleset, tune_rule
from apps.notifications.models import NotificationChannel
from apps.operations.api.serializers import OperationSerializer
from apps.workloads.models import Workload


class IncidentViewSet(ScopedReadOnlyViewSet):
    """GPU health incidents, one per node and cause. POST .../transition/ moves one (on-call, with a reason)."""

    model = Incident
    filterset_class = IncidentFilterSet
    select_related = ("node__cluster",)
    ordering_fields = ["detected_at", "severity", "state"]

    def get_queryset(self):
        qs = super().get_queryset()
        if self.action != "retrieve":
            return qs
        # An incident touches every tenant whose work was on the node: list only the workloads and tenants the
        # user may view (console-wide viewers: all of them).
        user = self.request.user
        return qs.prefetch_related(
            "events",
            Prefetch("workloads", queryset=Workload.objects.for_user(user, "view").only("pk")),
            Prefetch("tenants", queryset=Tenant.objects.for_user(user, "view").only("pk", "slug")),
        )

    def get_serializer_class(self):
        return IncidentDetailSerializer if self.action == "retrieve" else IncidentSerializer

    @extend_schema(request=TransitionSerializer, responses=IncidentSerializer)
    @action(detail=True, methods=["post"])
    def transition(self, request, pk=None):
        body = TransitionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        incident = transition_incident(
            request.user, self.get_object(), body.validated_data["to"], body.validated_data["reason"]
        )
        return Response(IncidentSerializer(incident).data)


def _node_action(name: str):
    def act(self, request, pk=None):
        body = NodeActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        node = self.get_object()
        if body.validated_data["dry_run"]:
            return Response(runbook.impact(request.user, node, name).as_dict())
        incident = None
        if body.validated_data.get("incident"):
            incident = Incident.objects.filter(node=node, pk=body.validated_data["incident"]).first()
            if incident is None:
                raise NotFound("No such incident on this node.", {"incident": "Not on this node."})
        operation = runbook.node_action(
            request.user, node, name, reason=body.validated_data["reason"], incident=incident
        )
        return Response(OperationSerializer(operation).data, status=status.HTTP_202_ACCEPTED)

    act.__name__ = name.replace("-", "_")
    # extend_schema goes on the action (outside it): applied to the bare function it was lost, and the schema
    # had these actions without a request body and without their 202.
    return extend_schema(
        request=NodeActionSerializer,
        responses={202: OperationSerializer, 200: ImpactSerializer},
        description=f"{name}: with `dry_run` the impact preview only; else a persisted operation (409 with the "
        "running operation when one is already acting on the node).",
    )(action(detail=True, methods=["post"], url_path=name, url_name=name)(act))


class NodeViewSet(FleetNodeViewSet):
    """GPU nodes, with the runbook actions for on-call: cordon, uncordon, drain, resume, request-reset, mark-rma
    (each needs a `reason`; `dry_run: true` previews the impact), and GET .../impact/?action=… for the preview."""

    cordon = _node_action("cordon")
    uncordon = _node_action("uncordon")
    drain = _node_action("drain")
    resume = _node_action("resume")
    request_reset = _node_action("request-reset")
    mark_rma = _node_action("mark-rma")

    @extend_schema(
        parameters=[OpenApiParameter("action", str, enum=list(runbook.ACTIONS), required=True)],
        responses=ImpactSerializer,
    )
    @action(detail=True, methods=["get"])
    def impact(self, request, pk=None):
        node = self.get_object()
        return Response(runbook.impact(request.user, node, request.query_params.get("action", "")).as_dict())


class RuleViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The health rules in force (the newest version). PATCH tunes one (platform admins): a new version."""

    serializer_class = RuleSerializer
    lookup_field = "key"
    pagination_class = None

    def get_queryset(self):
        return (
            Rule.objects.for_user(self.request.user, "view").filter(ruleset=active_ruleset()).select_related("ruleset")
        )

    @extend_schema(request=RuleTuneSerializer, responses=RuleSerializer)
    def partial_update(self, request, key=None):
        body = RuleTuneSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        ruleset = tune_rule(
            request.user, self.get_object().key, note=data.pop("note", ""), reason=data.pop("reason", ""), **data
        )
        return Response(RuleSerializer(ruleset.rules.get(key=key)).data)


class TelemetrySourceViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Where each cluster's DCGM telemetry is read, and how the last cycle went (malformed lines per node).
    POST sets a cluster's source (platform admins)."""

    model = TelemetrySource
    serializer_class = TelemetrySourceSerializer
    select_related = ("cluster",)

    @extend_schema(request=TelemetrySourceConfigureSerializer, responses={201: TelemetrySourceSerializer})
    def create(self, request, *args, **kwargs):
        body = TelemetrySourceConfigureSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        cluster = get_object_or_404(Cluster.objects.for_user(request.user, "view"), name=data.pop("cluster"))
        source = config.configure_source(request.user, cluster, **data)
        return Response(TelemetrySourceSerializer(source).data, status=status.HTTP_201_CREATED)


class ChannelViewSet(mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet):
    """Where health notifications go: on-call's channels and each tenant's (owners of affected work)."""

    serializer_class = ChannelSerializer

    def get_queryset(self):
        from apps.accounts.permissions import allowed_tenant_ids

        qs = NotificationChannel.objects.select_related("tenant")
        ids = allowed_tenant_ids(self.request.user, "manage")
        if ids is None:
            return qs
        return qs.filter(tenant_id__in=ids)

    @extend_schema(request=ChannelCreateSerializer, responses={201: ChannelSerializer})
    def create(self, request, *args, **kwargs):
        body = ChannelCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        slug = data.pop("tenant")
        tenant = None
        if slug:
            tenant = Tenant.objects.for_user(request.user, "view").filter(slug=slug).first()
            if tenant is None:
                raise NotFound(f"No tenant {slug!r}.", {"tenant": "Not found."})
        channel = config.add_channel(request.user, tenant=tenant, **data)
        return Response(ChannelSerializer(channel).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        config.remove_channel(request.user, self.get_object(), reason=request.query_params.get("reason", ""))
        return Response(status=status.HTTP_204_NO_CONTENT)


class IsolationPolicyViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Automatic isolation per pool (and the default): which severities cordon and drain, and the hourly budget.
    POST sets one (platform admins); naming no pool sets the default."""

    model = IsolationPolicy
    serializer_class = IsolationPolicySerializer
    select_related = ("pool__cluster",)

    @extend_schema(request=IsolationPolicySetSerializer, responses={201: IsolationPolicySerializer})
    def create(self, request, *args, **kwargs):
        body = IsolationPolicySetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        cluster, name = data.pop("cluster"), data.pop("pool")
        pool = None
        if name:
            pool = NodePool.objects.for_user(request.user, "view").filter(cluster__name=cluster, name=name).first()
            if pool is None:
                raise NotFound(f"No pool {name!r} in cluster {cluster!r}.", {"pool": "Not found."})
        policy = config.set_isolation_policy(request.user, pool, **data)
        return Response(IsolationPolicySerializer(policy).data, status=status.HTTP_201_CREATED)
