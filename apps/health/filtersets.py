import django_filters

from apps.core.filters import yes_no_any
from apps.health.models import CLOSED_STATES, Incident, IncidentState, Severity


class IncidentFilterSet(django_filters.FilterSet):
    """Filters for the incident board (UI) and /api/v1/incidents/."""

    cluster = django_filters.CharFilter(field_name="node__cluster__name", label="Cluster")
    node = django_filters.CharFilter(field_name="node__name", label="Node")
    state = django_filters.ChoiceFilter(choices=IncidentState.choices)
    severity = django_filters.ChoiceFilter(choices=Severity.choices)
    cause = django_filters.CharFilter()
    open = django_filters.BooleanFilter(method="filter_open", label="Open", widget=yes_no_any())

    class Meta:
        model = Incident
        fields = ["cluster", "node", "state", "severity", "cause", "open"]

    def filter_open(self, queryset, name, value):
        return queryset.exclude(state__in=CLOSED_STATES) if value else queryset.filter(state__in=CLOSED_STATES)
