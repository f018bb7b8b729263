"""API for queues, quotas, budgets, tiers, quota requests and admission previews."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.backends.shares import format_share, gpus_number
from apps.core.api.views import ScopedViewSetMixin
from apps.core.errors import NotFound
from apps.tenancy import services
from apps.tenancy.admission import POOL
from apps.tenancy.api.quota_serializers import (
    AdmissionPreviewSerializer,
    AdmissionSerializer,
    BindSerializer,
    GuaranteeCapSerializer,
    QueueSerializer,
    QuotaDecisionSerializer,
    QuotaRequestSerializer,
    QuotaSerializer,
    QuotaSetSerializer,
    TierSerializer,
)
from apps.tenancy.models import Admission, GuaranteeCap, PriorityTier, Queue, Quota, QuotaRequest


def _visible(user, queue: Queue) -> Queue:
    """A queue named in a request body must be one the caller can see: otherwise it does not exist (404)."""
    if not Queue.objects.for_user(user, "view").filter(pk=queue.pk).exists():
        raise NotFound(f"No queue {queue.pk}.", {"queue": "Not found."})
    return queue


class TierViewSet(mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Priority tiers; platform admins change value, preemptibility and borrowing with PATCH."""

    queryset = PriorityTier.objects.all()
    serializer_class = TierSerializer
    lookup_field = "name"
    pagination_class = None
    http_method_names = ["get", "patch", "head", "options"]

    def perform_update(self, serializer):
        serializer.instance = services.update_tier(self.request.user, serializer.instance, **serializer.validated_data)


class QueueViewSet(ScopedViewSetMixin, viewsets.ModelViewSet):
    """Queues of the tenants you can see. Tenant managers create and edit; platform admins bind them to clusters."""

    model = Queue
    serializer_class = QueueSerializer
    filterset_fields = ["tenant__slug", "name"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        return super().get_queryset().select_related("tenant").prefetch_related("bindings__cluster")

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.create_queue(
            self.request.user,
            tenant=data["tenant"],
            name=data["name"],
            description=data.get("description", ""),
            reason=data.get("reason", ""),
        )

    def perform_update(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.update_queue(
            self.request.user,
            serializer.instance,
            description=data.get("description", serializer.instance.description),
            reason=data.get("reason", ""),
        )

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        services.delete_queue(request.user, self.get_object(), reason=request.query_params.get("reason", ""))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=BindSerializer, responses=QueueSerializer)
    @action(detail=True, methods=["post"])
    def bind(self, request, pk=None):
        body = BindSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        queue = self.get_object()
        services.bind_queue(request.user, queue, **body.validated_data)
        return Response(QueueSerializer(self.get_queryset().get(pk=queue.pk)).data)


class QuotaViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Quota rows with current use. POST sets a queue's quota for one model (409 + impact if it would preempt)."""

    model = Quota
    serializer_class = QuotaSerializer
    filterset_fields = ["queue", "gpu_model__code", "queue__tenant__slug"]

    def get_queryset(self):
        return super().get_queryset().select_related("queue__tenant", "gpu_model")

    @staticmethod
    def _with_usage(quotas) -> list:
        """The quotas with their current `used`, `borrowed`, `lent` (the list and the detail say the same)."""
        from apps.tenancy.snapshot import build_snapshot

        snapshot, _ = build_snapshot(with_capacity=False)
        for quota in quotas:
            state = snapshot.quotas.get((quota.queue_id, quota.gpu_model.code))
            used, borrowed, lent = (state.used, state.borrowed, state.lent) if state else (0, 0, 0)
            quota.used, quota.borrowed, quota.lent = (gpus_number(n, snapshot.unit) for n in (used, borrowed, lent))
            quota.used_text = format_share(used, snapshot.unit)
        return quotas

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(QuotaSerializer(self._with_usage(page), many=True).data)

    def retrieve(self, request, *args, **kwargs):
        return Response(QuotaSerializer(self._with_usage([self.get_object()])[0]).data)

    @extend_schema(
        request=QuotaSetSerializer,
        responses=inline_serializer("QuotaSetResult", {"quota": QuotaSerializer(), "impact": serializers.DictField()}),
    )
    def create(self, request, *args, **kwargs):
        body = QuotaSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        data["queue"] = _visible(request.user, data["queue"])
        quota, impact = services.set_quota(request.user, **data)
        quota = self._with_usage([quota])[0]
        return Response({"quota": QuotaSerializer(quota).data, "impact": impact}, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=QuotaSetSerializer, responses=inline_serializer("QuotaPreview", {"impact": serializers.DictField()})
    )
    @action(detail=False, methods=["post"])
    def preview(self, request):
        body = QuotaSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        queue = _visible(request.user, data.pop("queue"))
        data.pop("confirm", None)
        data.pop("reason", None)
        return Response({"impact": services.preview_quota(request.user, queue, data.pop("gpu_model"), **data)})


class GuaranteeCapViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Tenant budgets per GPU model: the most guarantee a subtree may hold. POST sets one."""

    model = GuaranteeCap
    serializer_class = GuaranteeCapSerializer

    def get_queryset(self):
        return super().get_queryset().select_related("tenant", "gpu_model")

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.set_guarantee_cap(
            self.request.user,
            tenant=data["tenant"],
            gpu_model=data["gpu_model"],
            guaranteed=data["guaranteed"],
            reason=data.get("reason", ""),
        )


class QuotaRequestViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Requests for more quota: tenant admins create them, platform admins decide (POST .../decide/)."""

    model = QuotaRequest
    serializer_class = QuotaRequestSerializer
    filterset_fields = ["state", "queue"]

    def get_queryset(self):
        return super().get_queryset().select_related("queue__tenant", "gpu_model", "requested_by", "decided_by")

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.request_quota(
            self.request.user,
            queue=_visible(self.request.user, data["queue"]),
            gpu_model=data["gpu_model"],
            guaranteed=data["guaranteed"],
            borrow_limit=data.get("borrow_limit"),
            justification=data["justification"],
        )

    @extend_schema(request=QuotaDecisionSerializer, responses=QuotaRequestSerializer)
    @action(detail=True, methods=["post"])
    def decide(self, request, pk=None):
        body = QuotaDecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        decided = services.decide_quota_request(request.user, self.get_object(), **body.validated_data)
        return Response(QuotaRequestSerializer(decided).data)


class AdmissionViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Workloads' claims on quota: pending (with the reason), admitted (with lenders), rejected, released."""

    model = Admission
    serializer_class = AdmissionSerializer
    filterset_fields = ["state", "queue", "gpu_model__code"]

    def get_queryset(self):
        return super().get_queryset().select_related("queue__tenant", "gpu_model", "tier", "cluster")


class AdmissionPreviewView(APIView):
    """What would happen to a request now: admit, borrow (from whom), reclaim (whom), queue or reject, and why."""

    @extend_schema(
        request=AdmissionPreviewSerializer,
        responses=inline_serializer(
            "AdmissionDecision",
            {
                "decision": serializers.CharField(),
                "reason": serializers.CharField(),
                "borrow": serializers.ListField(),
                "reclaim": serializers.ListField(),
            },
        ),
    )
    def post(self, request):
        body = AdmissionPreviewSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        data["queue"] = _visible(request.user, data["queue"])
        result = services.preview_admission(request.user, **data)
        lenders = {q.pk: str(q) for q in Queue.objects.filter(pk__in=result.borrow).select_related("tenant")}
        victims = dict(Admission.objects.filter(pk__in=[h for h, _ in result.reclaim]).values_list("pk", "name"))
        return Response(
            {
                "decision": result.decision.value,
                "reason": result.reason,
                "borrow": [
                    {"queue": lenders.get(q, "unguaranteed capacity" if q == POOL else q), "gpus": gpus_number(n)}
                    for q, n in result.borrow.items()
                ],
                "reclaim": [
                    {"admission": h, "name": victims.get(h, h), "gpus": gpus_number(n)} for h, n in result.reclaim
                ],
            }
        )
