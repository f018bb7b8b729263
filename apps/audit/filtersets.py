import django_filters
from django.utils.translation import gettext_lazy as _

from apps.audit.models import AuditEvent
from apps.core.tenant_scope import visible_tenants


class AuditEventFilterSet(django_filters.FilterSet):
    """Filters for the audit log (UI and API).

    The tenant choices are the tenants the user may view; audit sits below accounts, so they come
    through apps.core.tenant_scope (filled in by accounts) rather than from accounts' filtersets.
    """

    tenant = django_filters.ModelChoiceFilter(
        field_name="tenant", to_field_name="slug", queryset=visible_tenants, label=_("Tenant")
    )
    actor = django_filters.CharFilter(field_name="actor_label", lookup_expr="istartswith", label=_("Actor"))
    action = django_filters.CharFilter(field_name="action", lookup_expr="istartswith", label=_("Action"))
    target_type = django_filters.CharFilter(label=_("Target type"))
    target_id = django_filters.CharFilter(label=_("Target id"))
    request_id = django_filters.CharFilter(label=_("Request id"))
    since = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="gte", label=_("Since (ISO 8601)"))
    until = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="lt", label=_("Until (ISO 8601)"))

    class Meta:
        model = AuditEvent
        fields = ["tenant", "actor", "action", "target_type", "target_id", "request_id", "since", "until"]
