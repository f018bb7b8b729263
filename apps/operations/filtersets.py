import django_filters
from django.utils.translation import gettext_lazy as _

from apps.accounts.filtersets import visible_tenants
from apps.operations.models import Operation, OperationStatus


class OperationFilterSet(django_filters.FilterSet):
    """Filters for operations (UI and API)."""

    tenant = django_filters.ModelChoiceFilter(
        field_name="tenant", to_field_name="slug", queryset=visible_tenants, label=_("Tenant")
    )
    status = django_filters.ChoiceFilter(choices=OperationStatus.choices, label=_("Status"))
    kind = django_filters.CharFilter(lookup_expr="istartswith", label=_("Kind starts with"))
    target_type = django_filters.CharFilter(label=_("Target type"))
    target_id = django_filters.CharFilter(label=_("Target id"))

    class Meta:
        model = Operation
        fields = ["tenant", "status", "kind", "target_type", "target_id"]
