import django_filters

from apps.tenancy.models import Tenant


class TenantFilterSet(django_filters.FilterSet):
    """Filters for the tenant list (UI and API)."""

    q = django_filters.CharFilter(method="search", label="Search")
    parent = django_filters.ModelChoiceFilter(queryset=Tenant.objects.all())
    root = django_filters.BooleanFilter(field_name="parent", lookup_expr="isnull", label="Top-level only")

    class Meta:
        model = Tenant
        fields = ["slug", "parent"]

    def search(self, queryset, name, value):
        return queryset.filter(name__icontains=value) | queryset.filter(slug__icontains=value)
