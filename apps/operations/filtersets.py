import django_filters
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from apps.accounts.filtersets import visible_tenants
from apps.operations.models import Operation, OperationStatus
from apps.operations.runner import FORMER_KINDS


class OperationFilterSet(django_filters.FilterSet):
    """Filters for operations (UI and API)."""

    tenant = django_filters.ModelChoiceFilter(
        field_name="tenant", to_field_name="slug", queryset=visible_tenants, label=_("Tenant")
    )
    status = django_filters.ChoiceFilter(choices=OperationStatus.choices, label=_("Status"))
    kind = django_filters.CharFilter(method="filter_kind", label=_("Kind starts with"))
    target_type = django_filters.CharFilter(label=_("Target type"))
    target_id = django_filters.CharFilter(label=_("Target id"))

    class Meta:
        model = Operation
        fields = ["tenant", "status", "kind", "target_type", "target_id"]

    def filter_kind(self, queryset, name, value):
        """Kinds starting with `value`, and the renamed kinds whose old spelling does (saved links keep working)."""
        renamed = [kind for former, kind in FORMER_KINDS.items() if former.startswith(value.lower())]
        return queryset.filter(Q(kind__istartswith=value) | Q(kind__in=renamed))
