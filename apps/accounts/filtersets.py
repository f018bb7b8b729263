import django_filters
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import ApiToken, Membership, Tenant, User
from apps.accounts.roles import Role
from apps.core.filters import yes_no_any


def visible_tenants(request):
    """Tenant choices in filters: only tenants the user may view (no names of other tenants leak)."""
    if request is None:
        return Tenant.objects.none()
    return Tenant.objects.for_user(request.user, "view")


class MembershipFilterSet(django_filters.FilterSet):
    """Filters for memberships (UI and API)."""

    tenant = django_filters.ModelChoiceFilter(
        field_name="tenant", to_field_name="slug", queryset=visible_tenants, label=_("Tenant")
    )
    user = django_filters.CharFilter(field_name="user__username", label=_("User"))
    role = django_filters.ChoiceFilter(choices=Role.choices, label=_("Role"))

    class Meta:
        model = Membership
        fields = ["tenant", "user", "role"]


class UserFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(field_name="username", lookup_expr="icontains", label=_("Search"))
    tenant = django_filters.CharFilter(field_name="memberships__tenant__slug", label=_("Tenant"))

    class Meta:
        model = User
        fields = ["is_service_account"]


class ApiTokenFilterSet(django_filters.FilterSet):
    tenant = django_filters.ModelChoiceFilter(
        field_name="tenant", to_field_name="slug", queryset=visible_tenants, label=_("Tenant")
    )
    user = django_filters.CharFilter(field_name="user__username", label=_("User"))
    active = django_filters.BooleanFilter(method="filter_active", label=_("Active"), widget=yes_no_any())

    role = django_filters.ChoiceFilter(choices=Role.choices, label=_("Role"))

    class Meta:
        model = ApiToken
        fields = ["tenant", "user", "role"]

    def filter_active(self, queryset, name, value):
        active = ApiToken.objects.active()
        return queryset.filter(pk__in=active) if value else queryset.exclude(pk__in=active)
