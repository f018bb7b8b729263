from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from apps.accounts.api.fields import TenantField
from apps.backends.shares import gpus_number
from apps.core.api.serializers import StrictModelSerializer, StrictSerializer
from apps.core.errors import NotFound
from apps.fleet.models import Cluster, GpuModel
from apps.tenancy.models import Admission, GuaranteeCap, PriorityTier, Queue, QueueBinding, Quota, QuotaRequest
from apps.tenancy.services.quotas import MAX_NAMESPACES

_MODEL = {"slug_field": "code", "queryset": GpuModel.objects.all()}


class TierSerializer(StrictModelSerializer):
    class Meta:
        model = PriorityTier
        fields = ["id", "name", "value", "preemptible", "may_borrow", "description"]
        read_only_fields = ["id", "name"]


class BindingSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = QueueBinding
        fields = ["cluster", "namespaces", "slurm_account"]


class QueueSerializer(StrictModelSerializer):
    tenant = TenantField()
    bindings = BindingSerializer(many=True, read_only=True)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)

    class Meta:
        model = Queue
        fields = ["id", "tenant", "name", "description", "bindings", "created_at", "reason"]
        read_only_fields = ["id", "created_at"]
        validators = []


class BindSerializer(StrictSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    namespaces = serializers.ListField(
        child=serializers.CharField(max_length=63), required=False, default=list, max_length=MAX_NAMESPACES
    )
    slurm_account = serializers.CharField(required=False, allow_blank=True, max_length=63, default="")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class QuotaSerializer(serializers.ModelSerializer):
    queue = serializers.CharField(source="queue.__str__", read_only=True)
    queue_id = serializers.IntegerField(read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="code", read_only=True)
    # GPUs, exactly as shares are counted (a float only where a share is fractional: 6.428571429 for 6 3/7);
    # the *_text fields say it as pages do ("6 3/7").
    used = serializers.FloatField(read_only=True, default=None)
    borrowed = serializers.FloatField(read_only=True, default=None)
    lent = serializers.FloatField(read_only=True, default=None)
    used_text = serializers.CharField(read_only=True, default=None)

    class Meta:
        model = Quota
        fields = [
            "id",
            "queue",
            "queue_id",
            "gpu_model",
            "guaranteed",
            "borrow_limit",
            "lend_limit",
            "weight",
            "per_user_limit",
            "used",
            "used_text",
            "borrowed",
            "lent",
            "updated_at",
        ]
        read_only_fields = fields


class QueueField(serializers.PrimaryKeyRelatedField):
    """A queue by id. One that does not exist answers exactly as one outside the caller's view (the views'
    `_visible`): 404 naming the field, so a body cannot probe which queue ids are taken."""

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if exc.get_codes() == ["does_not_exist"]:
                raise NotFound(f"No queue {data}.", {self.field_name: "Not found."}) from exc
            raise


class QuotaSetSerializer(StrictSerializer):
    queue = QueueField(queryset=Queue.objects.all())
    gpu_model = serializers.SlugRelatedField(**_MODEL)
    guaranteed = serializers.IntegerField(min_value=0)
    borrow_limit = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
    lend_limit = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
    weight = serializers.FloatField(required=False, default=1.0)
    per_user_limit = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
    confirm = serializers.BooleanField(required=False, default=False)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


# The API calls a guarantee cap the tenant's budget (/api/v1/budgets/); the schema keeps that component name.
@extend_schema_serializer(component_name="Budget")
class GuaranteeCapSerializer(StrictModelSerializer):
    tenant = TenantField()
    gpu_model = serializers.SlugRelatedField(**_MODEL)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)

    class Meta:
        model = GuaranteeCap
        fields = ["id", "tenant", "gpu_model", "guaranteed", "reason"]
        validators = []


class QuotaRequestSerializer(StrictModelSerializer):
    queue = QueueField(queryset=Queue.objects.all())
    queue_name = serializers.CharField(source="queue.__str__", read_only=True)
    gpu_model = serializers.SlugRelatedField(**_MODEL)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = QuotaRequest
        fields = [
            "id",
            "queue",
            "queue_name",
            "gpu_model",
            "guaranteed",
            "borrow_limit",
            "justification",
            "state",
            "granted",
            "requested_by",
            "decided_by",
            "decision_reason",
            "created_at",
            "decided_at",
        ]
        read_only_fields = [
            "id",
            "state",
            "granted",
            "requested_by",
            "decided_by",
            "decision_reason",
            "created_at",
            "decided_at",
        ]


class QuotaDecisionSerializer(StrictSerializer):
    approve = serializers.BooleanField()
    granted = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=4000, default="")
    confirm = serializers.BooleanField(required=False, default=False)


class AdmissionPreviewSerializer(StrictSerializer):
    queue = QueueField(queryset=Queue.objects.all())
    gpu_model = serializers.SlugRelatedField(**_MODEL)
    gpus = serializers.IntegerField(min_value=1, max_value=100000)
    gang = serializers.IntegerField(min_value=1, required=False, default=1)
    tier = serializers.SlugRelatedField(slug_field="name", queryset=PriorityTier.objects.all())
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), required=False, allow_null=True, default=None
    )


class AdmissionSerializer(serializers.ModelSerializer):
    """A claim. Amounts are GPUs (shares exactly as quota counts them: `gpus_text` "3/7"); `borrowed_from` maps
    lender queue ids (and "-1", unguaranteed capacity) to GPUs, `reclaim_plan` lists [claim id, GPUs]."""

    queue = serializers.CharField(source="queue.__str__", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="code", read_only=True)
    tier = serializers.SlugRelatedField(slug_field="name", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    gpus = serializers.SerializerMethodField()
    gpus_text = serializers.CharField(read_only=True)
    borrowed_from = serializers.SerializerMethodField()
    reclaim_plan = serializers.SerializerMethodField()
    reserved_gpus = serializers.SerializerMethodField()

    def get_gpus(self, claim) -> float:
        return gpus_number(claim.gpu_units)

    def get_borrowed_from(self, claim) -> dict[str, float]:
        return {k: gpus_number(v) for k, v in (claim.borrowed_from or {}).items()}

    def get_reclaim_plan(self, claim) -> list:
        return [[h, gpus_number(n)] for h, n in (claim.reclaim_plan or [])]

    def get_reserved_gpus(self, claim) -> float:
        return gpus_number(claim.reserved_units)

    class Meta:
        model = Admission
        fields = [
            "id",
            "name",
            "queue",
            "gpu_model",
            "cluster",
            "gpus",
            "gpus_text",
            "gang",
            "tier",
            "user",
            "state",
            "decision",
            "reason",
            "borrowed_from",
            "reclaim_plan",
            "submitted_at",
            "admitted_at",
            "ends_at",
            "released_at",
            "reserved_gpus",
            "expected_start",
        ]
        read_only_fields = fields
