import django_filters
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from apps.core.filters import yes_no_any
from apps.fleet.models import (
    Cluster,
    ClusterKind,
    ClusterStatus,
    FabricKind,
    Gpu,
    GpuHealth,
    GpuModel,
    Node,
    NodePool,
    NodeState,
    PoolPurpose,
)


class ClusterFilterSet(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=ClusterKind.choices, label=_("Kind"))
    status = django_filters.ChoiceFilter(choices=ClusterStatus.choices, label=_("Status"))

    class Meta:
        model = Cluster
        fields = ["kind", "status"]


class PoolFilterSet(django_filters.FilterSet):
    """Filters for node pools (the cluster page's table and the API)."""

    cluster = django_filters.CharFilter(field_name="cluster__name", label=_("Cluster"))
    purpose = django_filters.ChoiceFilter(choices=PoolPurpose.choices, label=_("Purpose"))
    model = django_filters.CharFilter(field_name="gpu_model__code", label=_("GPU model"))
    fabric = django_filters.ChoiceFilter(choices=FabricKind.choices, label=_("Fabric"))

    class Meta:
        model = NodePool
        fields = ["cluster", "purpose", "model", "fabric"]


class NodeFilterSet(django_filters.FilterSet):
    """Filters for the node list (UI and API)."""

    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label=_("Name"))
    cluster = django_filters.CharFilter(field_name="cluster__name", label=_("Cluster"))
    pool = django_filters.CharFilter(field_name="pool__name", label=_("Pool"))
    purpose = django_filters.ChoiceFilter(field_name="pool__purpose", choices=PoolPurpose.choices, label=_("Purpose"))
    model = django_filters.CharFilter(field_name="gpu_model__code", label=_("GPU model"))
    state = django_filters.ChoiceFilter(choices=NodeState.choices, label=_("State"))
    health = django_filters.ChoiceFilter(
        choices=[("healthy", _("All GPUs healthy")), ("unhealthy", _("Some GPU unhealthy"))],
        method="filter_health",
        label=_("Health"),
    )
    cordoned = django_filters.BooleanFilter(field_name="unschedulable", label=_("Cordoned"), widget=yes_no_any())
    rack = django_filters.CharFilter(label=_("Rack"))
    leaf_switch = django_filters.CharFilter(label=_("Leaf switch"))
    has_free = django_filters.BooleanFilter(method="filter_has_free", label=_("Has free GPUs"), widget=yes_no_any())

    class Meta:
        model = Node
        fields = ["q", "cluster", "pool", "purpose", "model", "state", "health", "cordoned", "rack", "leaf_switch"]

    def filter_health(self, queryset, name, value):
        return queryset.filter(gpu_unhealthy__gt=0) if value == "unhealthy" else queryset.filter(gpu_unhealthy=0)

    def filter_has_free(self, queryset, name, value):
        from django.db.models import F

        free = Q(state=NodeState.READY, unschedulable=False, gpu_allocatable__gt=F("gpu_allocated"))
        return queryset.filter(free) if value else queryset.exclude(free)


class GpuFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="node__cluster__name", label=_("Cluster"))
    node = django_filters.CharFilter(field_name="node__name", label=_("Node"))
    model = django_filters.CharFilter(field_name="model__code", label=_("GPU model"))
    health = django_filters.ChoiceFilter(choices=GpuHealth.choices, label=_("Health"))
    uuid = django_filters.CharFilter(label=_("UUID"))
    allocated = django_filters.BooleanFilter(method="filter_allocated", label=_("Allocated"))

    class Meta:
        model = Gpu
        fields = ["cluster", "node", "model", "health", "uuid"]

    def filter_allocated(self, queryset, name, value):
        return queryset.filter(allocated_fraction__gt=0) if value else queryset.filter(allocated_fraction=0)


class GpuModelFilterSet(django_filters.FilterSet):
    code = django_filters.CharFilter(label=_("Code"))
    vendor = django_filters.CharFilter(label=_("Vendor"))

    class Meta:
        model = GpuModel
        fields = ["code", "vendor"]
