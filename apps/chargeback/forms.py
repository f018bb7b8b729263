"""Forms for the chargeback pages; the services validate again and their errors land on these fields."""

from django import forms
from django.utils.translation import gettext_lazy as _

from apps.fleet.models import GpuModel
from apps.tenancy.models import PriorityTier


class RateCardForm(forms.Form):
    gpu_model = forms.ModelChoiceField(label=_("GPU model"), queryset=GpuModel.objects.all(), to_field_name="code")
    tier = forms.ModelChoiceField(
        label=_("Tier"),
        queryset=PriorityTier.objects.all(),
        to_field_name="name",
        required=False,
        empty_label=_("every tier"),
    )
    rate = forms.DecimalField(
        label=_("Rate"), max_digits=12, decimal_places=6, min_value=0, help_text=_("per GPU-hour")
    )
    effective_from = forms.DateTimeField(
        label=_("Effective from"),
        help_text=_("UTC, e.g. 2026-12-01 00:00"),
        # The format a datetime-local input shows: a value in Django's default format would render empty.
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    note = forms.CharField(label=_("Note"), max_length=300, required=False)


class PeriodActionForm(forms.Form):
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)


class SpendBudgetForm(forms.Form):
    monthly_amount = forms.DecimalField(label=_("Monthly amount"), max_digits=16, decimal_places=2, min_value=0)
    thresholds = forms.CharField(
        label=_("Thresholds"), initial="50, 80, 100", help_text=_("percentages, comma-separated")
    )
    block_preemptible_when_over = forms.BooleanField(
        label=_("Block preemptible when over"),
        required=False,
        help_text=_("stop admitting preemptible work once the month's spend reaches the budget"),
    )
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)

    def clean_thresholds(self) -> list[int]:
        try:
            return [int(part) for part in self.cleaned_data["thresholds"].replace(" ", "").split(",") if part]
        except ValueError:
            raise forms.ValidationError(_("Whole percentages separated by commas, e.g. 50, 80, 100.")) from None
