from django import forms
from django.utils.translation import gettext_lazy as _


class SloForm(forms.Form):
    """The service page's SLO form; the service validates the ranges (one path for API and page)."""

    ttft_target_s = forms.FloatField(label=_("TTFT target (s)"))
    tpot_target_s = forms.FloatField(label=_("TPOT target (s)"))
    objective = forms.FloatField(label=_("Objective (e.g. 0.99)"))
    reason = forms.CharField(label=_("Reason"), required=False, max_length=500)
