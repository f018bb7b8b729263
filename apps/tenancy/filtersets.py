import django_filters
from django.utils.translation import gettext_lazy as _

from apps.core.filters import yes_no_any
from apps.tenancy.models import Tenant


def visible_tenants(request):
    """Tenant choices in filters: only tenants the user may view (no names of other tenants leak)."""
    if request is None:
        return Tenant.objects.none()
    return Tenant.objects.for_user(request.user, "view")


class TenantFilterSet(django_filters.FilterSet):
    """Filters for the tenant list (UI and API)."""

    q = django_filters.CharFilter(method="search", label=_("Search"))
    parent = django_filters.ModelChoiceFilter(
        field_name="parent", to_field_name="slug", queryset=visible_tenants, label=_("Parent")
    )
    slug = django_filters.CharFilter(label=_("Slug"))
    root = django_filters.BooleanFilter(
        field_name="parent", lookup_expr="isnull", label=_("Top-level"), widget=yes_no_any()
    )

    class Meta:
        model = Tenant
        fields = ["slug", "parent"]

    def search(self, queryset, name, value):
        return queryset.filter(name__icontains=value) | queryset.filter(slug__icontains=value)
