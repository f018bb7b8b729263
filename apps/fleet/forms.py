from django import forms

from apps.fleet.models import ClusterKind


class ClusterForm(forms.Form):
    """Register a cluster; connection settings as JSON, the secret by environment variable name only."""

    name = forms.CharField(max_length=63, help_text="DNS-1123 label, e.g. prod-h100")
    kind = forms.ChoiceField(choices=ClusterKind.choices)
    description = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
    connection = forms.JSONField(
        required=False,
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text='Non-secret settings, e.g. {"api_url": "https://k8s.example:6443"}; for a simulated cluster the '
        'fleet shape, e.g. {"nodes": 16, "models": {"h100": 1}}',
    )
    secret_env = forms.CharField(
        required=False, max_length=128, help_text="Name of the environment variable that holds the token or kubeconfig"
    )
    reason = forms.CharField(required=False, max_length=2000)
