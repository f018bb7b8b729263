import django_filters

from apps.operations.models import Operation, OperationStatus
from apps.tenancy.filtersets import visible_tenants


class OperationFilterSet(django_filters.FilterSet):
    """Filters for operations (UI and API)."""

    tenant = django_filters.ModelChoiceFilter(field_name="tenant", to_field_name="slug", queryset=visible_tenants)
    status = django_filters.ChoiceFilter(choices=OperationStatus.choices)
    kind = django_filters.CharFilter(lookup_expr="istartswith")
    target_type = django_filters.CharFilter()
    target_id = django_filters.CharFilter()

    class Meta:
        model = Operation
        fields = ["tenant", "status", "kind", "target_type", "target_id"]
