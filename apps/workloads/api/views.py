from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import Tenant
from apps.core.api.schema import ErrorSerializer
from apps.core.api.views import ScopedViewSetMixin
from apps.core.errors import NotFound
from apps.workloads import services
from apps.workloads.api.serializers import (
    CancelSerializer,
    HeartbeatSerializer,
    LogsQuerySerializer,
    TemplateSaveSerializer,
    TemplateSerializer,
    TemplateSubmitSerializer,
    WorkloadDetailSerializer,
    WorkloadSerializer,
    WorkloadSubmitSerializer,
    short_form,
    submit_body,
)
from apps.workloads.filtersets import WorkloadFilterSet
from apps.workloads.logs import LogStream, open_log_stream
from apps.workloads.models import Workload, WorkloadTemplate
from apps.workloads.specs import KINDS, json_schema

IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retries with the same key return the same workload, never a second one.",
)


def log_response(stream: LogStream) -> StreamingHttpResponse:
    """A log as a chunked text answer, each line sent as it comes (never buffered by a proxy that honours
    X-Accel-Buffering, as nginx does, nor cached)."""
    response = StreamingHttpResponse(stream, content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    return response


def _submitted(workload: Workload, created: bool) -> Response:
    body = short_form(workload)  # WorkloadSerializer's fields; the timeline is at GET /workloads/{id}/
    return Response(
        body,
        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        headers={"Idempotent-Replayed": "false" if created else "true"},
    )


class JsonErrors(BaseContentNegotiation):
    """The log's errors are JSON whatever the client accepts: its lines are a text/plain stream no renderer
    touches, and a client that asks for text/plain (`gpuc logs`) must still read an error in the API's one shape."""

    def select_parser(self, request, parsers):
        return parsers[0]

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = next((r for r in renderers if isinstance(r, JSONRenderer)), renderers[0])
        return renderer, renderer.media_type


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


LOG_RESPONSES = {
    (200, "text/plain"): OpenApiResponse(
        OpenApiTypes.STR,
        description="The log, one line per line, streamed (chunked) as it is read from the cluster: the last `tail` "
        "lines of each worker, then with `follow` each new line, until the workload stops or the server's limit. "
        "Every worker's lines start with `[worker K] ` when `worker` is left out and there are several. If the "
        "cluster fails once lines are sent, the last line starts with `[gpu-console] ` and says why.",
    ),
    409: _error(
        "No log to read: `logs_not_ready` (not on its cluster yet, its pods or job not started; `Retry-After`), "
        "`logs_gone` (ended, and its cluster keeps no log of it; `detail.url`: the cluster's log system)."
    ),
    501: _error(
        "`logs_not_streamable`: the cluster cannot stream logs, or is set not to (`detail.url`: its log system, "
        "`detail.command`: how to read them on the cluster)."
    ),
    502: _error("`backend_error`: the cluster refused (its message says why)."),
    503: _error("`backend_unavailable`: the cluster did not answer; `Retry-After` says when to try again."),
}


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
        kind, spec = submit_body(request.data)
        workload, created = services.submit_workload(
            request.user, kind=kind, spec=spec, idempotency_key=request.headers.get("Idempotency-Key")
        )
        return _submitted(workload, created)

    @extend_schema(request=CancelSerializer, responses=WorkloadSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        body = CancelSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workload = services.cancel_workload(request.user, self.get_object(), **body.validated_data)
        return Response(WorkloadSerializer(workload).data)

    @extend_schema(
        request=None,
        responses={200: HeartbeatSerializer, 409: _error("`not_running`: the job is not placed (pending or ended).")},
    )
    @action(detail=True, methods=["post"])
    def heartbeat(self, request, pk=None):
        """The running job's progress signal: a job whose spec sets `progress_timeout_minutes` and sends none for
        that long is hung (docs/health.md). Only the latest time is kept; heartbeats are not audited."""
        at = services.record_heartbeat(request.user, self.get_object())
        return Response({"last_heartbeat_at": at})

    @extend_schema(parameters=[LogsQuerySerializer], responses=LOG_RESPONSES)
    @action(detail=True, methods=["get"], content_negotiation_class=JsonErrors)
    def logs(self, request, pk=None):
        """The workload's log, streamed from its cluster as text (docs/logs.md). Nothing is stored by the console."""
        workload = self.get_object()  # outside the caller's view: 404, before anything else is said
        query = LogsQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        return log_response(open_log_stream(workload, **query.validated_data))

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
