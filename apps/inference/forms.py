from django import forms


class SloForm(forms.Form):
    """The service page's SLO form; the service validates the ranges (one path for API and page)."""

    ttft_target_s = forms.FloatField(label="TTFT target (s)")
    tpot_target_s = forms.FloatField(label="TPOT target (s)")
    objective = forms.FloatField(label="Objective (e.g. 0.99)")
    reason = forms.CharField(required=False, max_length=500)
