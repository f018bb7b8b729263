from django import forms
from django.utils.translation import gettext_lazy as _

from apps.core.jsondepth import BoundedJSONDecoder
from apps.fleet.models import ClusterKind


class ClusterForm(forms.Form):
    """Register a cluster; connection settings as JSON, the secret by environment variable name only."""

    name = forms.CharField(label=_("Name"), max_length=63, help_text=_("DNS-1123 label, e.g. prod-h100"))
    kind = forms.ChoiceField(label=_("Kind"), choices=ClusterKind.choices)
    description = forms.CharField(
        label=_("Description"), required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2})
    )
    connection = forms.JSONField(
        decoder=BoundedJSONDecoder,
        label=_("Connection"),
        required=False,
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=_(
            'Non-secret settings, e.g. {"api_url": "https://k8s.example:6443"}; for a simulated cluster the '
            'fleet shape, e.g. {"nodes": 16, "models": {"h100": 1}}. What workloads become on Kubernetes: '
            '"inference_target" (deployment, lws or kserve) and "training_target" (kueue-job, volcano or trainjob)'
        ),
    )
    secret_env = forms.CharField(
        label=_("Secret env"),
        required=False,
        max_length=128,
        help_text=_(
            "Name of the environment variable that holds the token or kubeconfig; it starts with the "
            "deployment's SECRET_ENV_PREFIX (GPUC_SECRET_ by default)"
        ),
    )
    reason = forms.CharField(label=_("Reason"), required=False, max_length=2000)
