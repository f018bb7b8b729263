from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import Tenant
from apps.core.api.views import ScopedViewSetMixin
from apps.core.errors import NotFound
from apps.workloads import services
from apps.workloads.api.serializers import (
    CancelSerializer,
    TemplateSaveSerializer,
    TemplateSerializer,
    TemplateSubmitSerializer,
    WorkloadDetailSerializer,
    WorkloadSerializer,
    WorkloadSubmitSerializer,
    short_form,
)
from apps.workloads.filtersets import WorkloadFilterSet
from apps.workloads.models import Workload, WorkloadTemplate
from apps.workloads.specs import KINDS, json_schema

IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retries with the same key return the same workload, never a second one.",
)


def _submitted(workload: Workload, created: bool) -> Response:
    body = short_form(workload)  # WorkloadSerializer's fields; the timeline is at GET /workloads/{id}/
    return Response(
        body,
        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        headers={"Idempotent-Replayed": "false" if created else "true"},
    )


class WorkloadViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Training jobs and inference services. POST submits (send an Idempotency-Key); POST .../cancel/ cancels."""

    model = Workload
    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilterSet
    ordering_fields = ["created_at", "state", "gpus"]

    def get_queryset(self):
        qs = (
            super()
            .get_queryset()
            .select_related("tenant", "queue", "tier", "cluster", "gpu_model", "created_by", "admission")
        )
        return qs.prefetch_related("events") if self.action == "retrieve" else qs

    def get_serializer_class(self):
        return WorkloadDetailSerializer if self.action == "retrieve" else WorkloadSerializer

    @extend_schema(
        request=WorkloadSubmitSerializer,
        parameters=[IDEMPOTENCY],
        responses={201: WorkloadSerializer, 200: WorkloadSerializer},
    )
    def create(self, request, *args, **kwargs):
        body = WorkloadSubmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workload, created = services.submit_workload(
            request.user,
            kind=body.validated_data["kind"],
            spec=body.validated_data["spec"],
            idempotency_key=request.headers.get("Idempotency-Key"),
        )
        return _submitted(workload, created)

    @extend_schema(request=CancelSerializer, responses=WorkloadSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        body = CancelSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workload = services.cancel_workload(request.user, self.get_object(), **body.validated_data)
        return Response(WorkloadSerializer(workload).data)

    @extend_schema(responses={200: None})
    @action(detail=True, methods=["get"])
    def rendered(self, request, pk=None):
        """The manifests or sbatch script this workload becomes on its cluster."""
        from apps.workloads.rendering import render_workload

        text, error = render_workload(self.get_object())
        return Response({"text": text, "error": error})


class TemplateViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Saved, versioned specs per tenant. POST saves (a known name adds a version); POST .../submit/ instantiates."""

    model = WorkloadTemplate
    serializer_class = TemplateSerializer
    filterset_fields = ["name", "kind", "tenant__slug"]

    def get_queryset(self):
        return super().get_queryset().select_related("tenant", "created_by")

    @extend_schema(request=TemplateSaveSerializer, responses={201: TemplateSerializer})
    def create(self, request, *args, **kwargs):
        body = TemplateSaveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        tenant = Tenant.objects.for_user(request.user, "view").filter(slug=data.pop("tenant")).first()
        if tenant is None:
            raise NotFound("No such tenant.", {"tenant": "Not found."})
        template = services.save_template(request.user, tenant=tenant, **data)
        return Response(TemplateSerializer(template).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=TemplateSubmitSerializer, parameters=[IDEMPOTENCY], responses={201: WorkloadSerializer})
    @action(detail=True, methods=["post"])
    def submit(self, request, pk=None):
        body = TemplateSubmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workload, created = services.submit_from_template(
            request.user,
            self.get_object(),
            overrides=body.validated_data["overrides"],
            idempotency_key=request.headers.get("Idempotency-Key"),
        )
        return _submitted(workload, created)


class WorkloadSpecSchemaView(APIView):
    """The JSON Schema (draft 2020-12) of a training job or inference service spec: every field with its type,
    bounds, choices, default, title, help text and form section (`x-group`). What POST /workloads/ validates."""

    @extend_schema(
        parameters=[OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=list(KINDS))],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, kind: str):
        if kind not in KINDS:
            raise NotFound(f"No spec kind {kind!r}: one of {', '.join(KINDS)}.", {"kind": "Not found."})
        return Response(json_schema(kind))
