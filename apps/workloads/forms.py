import json

from django import forms

from apps.workloads.models import WorkloadKind, WorkloadTemplate


class SubmitForm(forms.Form):
    """Submit a spec as JSON, or instantiate a template with overrides (JSON)."""

    kind = forms.ChoiceField(choices=WorkloadKind.choices)
    template = forms.ModelChoiceField(
        queryset=WorkloadTemplate.objects.none(), required=False, empty_label="(no template: write the spec)"
    )
    spec = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14, "class": "font-monospace"}),
        required=False,
        help_text="JSON. With a template: only the fields to override.",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["template"].queryset = WorkloadTemplate.objects.for_user(user, "view").select_related("tenant")

    def clean_spec(self):
        raw = self.cleaned_data.get("spec") or "{}"
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.") from exc
        if not isinstance(value, dict):
            raise forms.ValidationError("The spec is a JSON object.")
        return value
