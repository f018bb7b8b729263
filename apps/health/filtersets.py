import django_filters
from django.utils.translation import gettext_lazy as _

from apps.core.filters import yes_no_any
from apps.health.models import CLOSED_STATES, Incident, IncidentState, Severity


class IncidentFilterSet(django_filters.FilterSet):
    """Filters for the incident board (UI) and /api/v1/incidents/."""

    cluster = django_filters.CharFilter(field_name="node__cluster__name", label=_("Cluster"))
    node = django_filters.CharFilter(field_name="node__name", label=_("Node"))
    state = django_filters.ChoiceFilter(choices=IncidentState.choices, label=_("State"))
    severity = django_filters.ChoiceFilter(choices=Severity.choices, label=_("Severity"))
    cause = django_filters.CharFilter(label=_("Cause"))
    open = django_filters.BooleanFilter(method="filter_open", label=_("Open"), widget=yes_no_any())

    class Meta:
        model = Incident
        fields = ["cluster", "node", "state", "severity", "cause", "open"]

    def filter_open(self, queryset, name, value):
        return queryset.exclude(state__in=CLOSED_STATES) if value else queryset.filter(state__in=CLOSED_STATES)
