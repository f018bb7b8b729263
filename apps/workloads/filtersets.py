import django_filters

from apps.tenancy.filtersets import visible_tenants
from apps.workloads.models import Workload, WorkloadKind, WorkloadState, WorkloadTemplate


class WorkloadFilterSet(django_filters.FilterSet):
    """Filters for the workload list (UI and API)."""

    tenant = django_filters.ModelChoiceFilter(field_name="tenant", to_field_name="slug", queryset=visible_tenants)
    state = django_filters.ChoiceFilter(choices=WorkloadState.choices)
    kind = django_filters.ChoiceFilter(choices=WorkloadKind.choices)
    cluster = django_filters.CharFilter(field_name="cluster__name", label="Cluster")
    gpu_model = django_filters.CharFilter(field_name="gpu_model__code", label="GPU model")
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name")

    class Meta:
        model = Workload
        fields = ["tenant", "state", "kind", "cluster", "gpu_model", "q"]


class TemplateFilterSet(django_filters.FilterSet):
    """Filters for the template list (UI)."""

    tenant = django_filters.ModelChoiceFilter(field_name="tenant", to_field_name="slug", queryset=visible_tenants)
    kind = django_filters.ChoiceFilter(choices=WorkloadKind.choices)
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name")

    class Meta:
        model = WorkloadTemplate
        fields = ["tenant", "kind", "q"]
