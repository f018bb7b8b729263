import django_filters
from django.utils.translation import gettext_lazy as _

from apps.accounts.filtersets import visible_tenants
from apps.accounts.models import Tenant
from apps.core.filters import yes_no_any


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
    archived = django_filters.BooleanFilter(
        field_name="archived_at", lookup_expr="isnull", exclude=True, label=_("Archived"), widget=yes_no_any()
    )

    class Meta:
        model = Tenant
        fields = ["slug", "parent"]

    @property
    def qs(self):
        """Archived tenants are hidden unless `archived` is given (yes: only them; no: only live ones)."""
        queryset = super().qs
        cleaned = getattr(self.form, "cleaned_data", None) if self.is_bound else None
        return queryset.filter(archived_at__isnull=True) if (cleaned or {}).get("archived") is None else queryset

    def search(self, queryset, name, value):
        return queryset.filter(name__icontains=value) | queryset.filter(slug__icontains=value)
