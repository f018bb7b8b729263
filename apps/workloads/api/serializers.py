from django.urls import reverse
from django.utils import timezone
from rest_framework import serializers

from apps.backends.shares import gpus_number
from apps.core.api.serializers import StrictSerializer
from apps.workloads.api.spec_schema import SpecField
from apps.workloads.logs import TAIL_DEFAULT, TAIL_MAX, logs_for
from apps.workloads.models import Workload, WorkloadEvent, WorkloadKind, WorkloadTemplate


class WorkloadEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = WorkloadEvent
        fields = ["time", "kind", "message"]


class WorkloadSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    queue = serializers.CharField(source="queue.name", read_only=True)
    tier = serializers.SlugRelatedField(slug_field="name", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="code", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    admission = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = [
            "id",
            "kind",
            "name",
            "tenant",
            "queue",
            "tier",
            "cluster",
            "gpu_model",
            "gpus",
            "state",
            "state_reason",
            "backend_name",
            "placements",
            "admission",
            "requeues",
            "idempotency_key",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "last_heartbeat_at",
            "spec",
        ]
        read_only_fields = fields

    def get_admission(self, workload) -> dict | None:
        return _admission(workload.admission)


def _admission(claim) -> dict | None:
    """The workload's claim as its page shows it: the decision and its reason, and for a waiting head of its queue
    the reservation it holds ("holds 8 × H100; expected start ...")."""
    if claim is None:
        return None
    return {
        "state": claim.state,
        "decision": claim.decision,
        "reason": claim.reason,
        "borrowed_from": claim.borrowed_from,
        "reserved_gpus": gpus_number(claim.reserved_units),
        "expected_start": _when(claim.expected_start),
        "holds_cluster": claim.holds_cluster,
    }


def _when(value) -> str | None:
    """A time as DRF's DateTimeField writes it (ISO 8601 in the current time zone, UTC as "Z")."""
    if value is None:
        return None
    text = timezone.localtime(value).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def short_form(workload: Workload) -> dict:
    """What `WorkloadSerializer(workload).data` gives, built directly: every submission answers with it, and
    DRF's field machinery costs about a millisecond per response (tests/workloads/test_submission.py
    checks both agree)."""
    claim = workload.admission
    return {
        "id": workload.pk,
        "kind": workload.kind,
        "name": workload.name,
        "tenant": workload.tenant.slug,
        "queue": workload.queue.name,
        "tier": workload.tier.name,
        "cluster": workload.cluster.name,
        "gpu_model": workload.gpu_model.code,
        "gpus": workload.gpus,
        "state": workload.state,
        "state_reason": workload.state_reason,
        "backend_name": workload.backend_name,
        "placements": workload.placements,
        "admission": _admission(claim),
        "requeues": workload.requeues,
        "idempotency_key": workload.idempotency_key,
        "created_by": workload.created_by.username if workload.created_by_id else None,
        "created_at": _when(workload.created_at),
        "started_at": _when(workload.started_at),
        "finished_at": _when(workload.finished_at),
        "last_heartbeat_at": _when(workload.last_heartbeat_at),
        "spec": workload.spec,
    }


class WorkloadDetailSerializer(WorkloadSerializer):
    events = WorkloadEventSerializer(many=True, read_only=True)
    logs = serializers.SerializerMethodField()

    class Meta(WorkloadSerializer.Meta):
        fields = [*WorkloadSerializer.Meta.fields, "events", "logs"]
        read_only_fields = fields

    def get_logs(self, workload) -> dict:
        """Where the logs are: the cluster's log system (`url`), how to read them there (`command`), our page, and
        the log itself streamed from the cluster (`stream`: GET /api/v1/workloads/{id}/logs/)."""
        logs = logs_for(workload)
        page = reverse("workloads:workload_logs", args=[workload.pk])
        stream = reverse("api:workload-logs", args=[workload.pk])
        request = self.context.get("request")
        return {
            "url": logs.url or None,
            "command": logs.command or None,
            "page": request.build_absolute_uri(page) if request else page,
            "stream": request.build_absolute_uri(stream) if request else stream,
        }


class LogsQuerySerializer(serializers.Serializer):
    """The query of GET /api/v1/workloads/{id}/logs/ (docs/logs.md)."""

    tail = serializers.IntegerField(
        min_value=0,
        max_value=TAIL_MAX,
        default=TAIL_DEFAULT,
        help_text=f"Lines from the end of each worker's log (0 to {TAIL_MAX}; default {TAIL_DEFAULT}).",
    )
    follow = serializers.BooleanField(
        default=False,
        help_text="Keep the answer open and send lines as they are written, until the workload stops or the "
        "server's limit (LOGS_FOLLOW_MAX_S) is reached.",
    )
    worker = serializers.IntegerField(
        min_value=0,
        required=False,
        help_text="One worker of the gang (an inference service's replica, read from its leader). Left out: every "
        "worker, each line prefixed `[worker K] `; an inference service's leaders.",
    )


class WorkloadSubmitSerializer(StrictSerializer):
    kind = serializers.ChoiceField(choices=WorkloadKind.choices)
    spec = SpecField(
        help_text="The training job or inference service spec, of its kind "
        "(JSON Schema: GET /api/v1/workload-specs/{kind}/schema/; docs/api.md)"
    )


_SUBMIT_FIELDS = frozenset(WorkloadSubmitSerializer._declared_fields)
_KINDS = frozenset(WorkloadKind.values)


def submit_body(data) -> tuple[str, dict]:
    """(kind, spec) of a submission's body, as `WorkloadSubmitSerializer` validates it. The body every client sends
    (exactly `kind`, one of the kinds, and `spec`, an object) is taken as it is: the serializer's fields would
    answer the same for it (tests/workloads/test_submit_body.py) at a tenth of a millisecond per submission. Any
    other body goes through the serializer, whose errors name the field."""
    if type(data) is dict and data.keys() == _SUBMIT_FIELDS:
        kind, spec = data["kind"], data["spec"]
        if type(kind) is str and kind in _KINDS and type(spec) is dict:
            return kind, spec
    body = WorkloadSubmitSerializer(data=data)
    body.is_valid(raise_exception=True)
    return body.validated_data["kind"], body.validated_data["spec"]


class TemplateSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = WorkloadTemplate
        fields = ["id", "tenant", "name", "version", "kind", "description", "spec", "created_by", "created_at"]
        read_only_fields = fields


class TemplateSaveSerializer(StrictSerializer):
    tenant = serializers.CharField(max_length=63)
    name = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(choices=WorkloadKind.choices)
    description = serializers.CharField(required=False, allow_blank=True, max_length=300, default="")
    spec = SpecField(help_text="A spec of its kind; `tenant` may be left out (the template's tenant is used)")


class TemplateSubmitSerializer(StrictSerializer):
    overrides = serializers.DictField(
        required=False,
        default=dict,
        help_text="Merged into the template's spec: objects merge, lists and values replace, null removes a field",
    )


class HeartbeatSerializer(serializers.Serializer):
    last_heartbeat_at = serializers.DateTimeField(read_only=True)


class CancelSerializer(StrictSerializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")
