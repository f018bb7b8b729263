import json

from django import forms
from django.utils.translation import gettext_lazy as _

from apps.core.jsondepth import BoundedJSONDecoder
from apps.workloads.models import WorkloadKind, WorkloadTemplate


class SubmitForm(forms.Form):
    """Submit a spec as JSON, or instantiate a template with overrides (JSON)."""

    kind = forms.ChoiceField(label=_("Kind"), choices=WorkloadKind.choices)
    template = forms.ModelChoiceField(
        label=_("Template"),
        queryset=WorkloadTemplate.objects.none(),
        required=False,
        empty_label=_("(no template: write the spec)"),
    )
    spec = forms.CharField(
        label=_("Spec"),
        widget=forms.Textarea(attrs={"rows": 14, "class": "font-monospace"}),
        required=False,
        help_text=_("JSON. With a template: only the fields to override."),
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["template"].queryset = WorkloadTemplate.objects.for_user(user, "view").select_related("tenant")

    def clean_spec(self):
        raw = self.cleaned_data.get("spec") or "{}"
        try:
            value = json.loads(raw, cls=BoundedJSONDecoder)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                _("Not valid JSON: %(error)s at line %(line)s, column %(column)s.")
                % {"error": exc.msg, "line": exc.lineno, "column": exc.colno}
            ) from exc
        if not isinstance(value, dict):
            raise forms.ValidationError(_("The spec is a JSON object."))
        return value
