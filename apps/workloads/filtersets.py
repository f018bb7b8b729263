import django_filters
from django.utils.translation import gettext_lazy as _

from apps.accounts.filtersets import visible_tenants
from apps.workloads.models import Workload, WorkloadKind, WorkloadState, WorkloadTemplate


class WorkloadFilterSet(django_filters.FilterSet):
    """Filters for the workload list (UI and API)."""

    tenant = django_filters.ModelChoiceFilter(
        field_name="tenant", to_field_name="slug", queryset=visible_tenants, label=_("Tenant")
    )
    state = django_filters.ChoiceFilter(choices=WorkloadState.choices, label=_("State"))
    kind = django_filters.ChoiceFilter(choices=WorkloadKind.choices, label=_("Kind"))
    cluster = django_filters.CharFilter(field_name="cluster__name", label=_("Cluster"))
    gpu_model = django_filters.CharFilter(field_name="gpu_model__code", label=_("GPU model"))
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label=_("Name"))

    class Meta:
        model = Workload
        fields = ["tenant", "state", "kind", "cluster", "gpu_model", "q"]


class TemplateFilterSet(django_filters.FilterSet):
    """Filters for the template list (UI)."""

    tenant = django_filters.ModelChoiceFilter(
        field_name="tenant", to_field_name="slug", queryset=visible_tenants, label=_("Tenant")
    )
    kind = django_filters.ChoiceFilter(choices=WorkloadKind.choices, label=_("Kind"))
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label=_("Name"))

    class Meta:
        model = WorkloadTemplate
        fields = ["tenant", "kind", "q"]
