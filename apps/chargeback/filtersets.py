"""Filters for the statement list."""

from datetime import UTC, datetime

import django_filters
from django import forms
from django.utils.translation import gettext_lazy as _

from apps.accounts.filtersets import visible_tenants
from apps.chargeback.models import Statement


class StatementFilterSet(django_filters.FilterSet):
    """Statements by period (YYYY-MM) and tenant; only tenants the user may view are offered."""

    period = django_filters.CharFilter(
        method="filter_period", label=_("Period (YYYY-MM)"), widget=forms.TextInput(attrs={"placeholder": "YYYY-MM"})
    )
    tenant = django_filters.ModelChoiceFilter(
        field_name="tenant", to_field_name="slug", queryset=visible_tenants, label=_("Tenant")
    )

    class Meta:
        model = Statement
        fields = ["period", "tenant"]

    def filter_period(self, queryset, name, value):
        try:
            start = datetime.strptime(value.strip(), "%Y-%m").replace(tzinfo=UTC)
        except ValueError:
            return queryset.none()  # a malformed month matches nothing rather than everything
        return queryset.filter(period__start=start)
