from django import forms
from django.utils.translation import gettext_lazy as _

from apps.accounts.forms import TenantChoiceField
from apps.accounts.models import Tenant


class TenantForm(forms.ModelForm):
    """Name, slug, parent and description; the service checks who may put a tenant where."""

    parent = TenantChoiceField(
        label=_("Parent"), queryset=Tenant.objects.none(), required=False, empty_label=_("(top-level organization)")
    )
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)

    class Meta:
        model = Tenant
        fields = ["name", "slug", "parent", "description"]
        labels = {"name": _("Name"), "slug": _("Slug"), "description": _("Description")}
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["parent"].queryset = Tenant.objects.for_user(user, "manage").live()

    def validate_unique(self):
        # Uniqueness is checked by the service, which reports it as a field error.
        pass


class QuotaRequestForm(forms.Form):
    queue = forms.ModelChoiceField(label=_("Queue"), queryset=None)
    gpu_model = forms.ModelChoiceField(queryset=None, to_field_name="code", label=_("GPU model"))
    guaranteed = forms.IntegerField(
        label=_("Guaranteed"), min_value=0, help_text=_("The guarantee you need (the new total).")
    )
    borrow_limit = forms.IntegerField(label=_("Borrow limit"), min_value=0, required=False)
    justification = forms.CharField(label=_("Justification"), widget=forms.Textarea(attrs={"rows": 3}), max_length=4000)

    def __init__(self, *args, user, **kwargs):
        from apps.fleet.models import GpuModel
        from apps.tenancy.models import Queue

        super().__init__(*args, **kwargs)
        self.fields["queue"].queryset = (
            Queue.objects.for_user(user, "manage").filter(tenant__archived_at__isnull=True).select_related("tenant")
        )
        self.fields["gpu_model"].queryset = GpuModel.objects.all()


class QuotaDecisionForm(forms.Form):
    request_id = forms.IntegerField(label=_("Request"))
    approve = forms.TypedChoiceField(
        label=_("Decision"), choices=[("yes", _("approve")), ("no", _("reject"))], coerce=lambda v: v == "yes"
    )
    granted = forms.IntegerField(label=_("Granted"), min_value=0, required=False)
    reason = forms.CharField(label=_("Reason"), required=False, max_length=4000)
    confirm = forms.BooleanField(label=_("Confirm preemptions"), required=False)


class QuotaForm(forms.Form):
    """Set one GPU model's quota on a queue; "preview" shows the impact, "apply" writes it."""

    gpu_model = forms.ModelChoiceField(queryset=None, to_field_name="code", label=_("GPU model"))
    guaranteed = forms.IntegerField(label=_("Guaranteed"), min_value=0)
    borrow_limit = forms.IntegerField(
        label=_("Borrow limit"), min_value=0, required=False, help_text=_("Empty: unlimited.")
    )
    lend_limit = forms.IntegerField(
        label=_("Lend limit"), min_value=0, required=False, help_text=_("Empty: all of the unused guarantee.")
    )
    weight = forms.FloatField(label=_("Weight"), min_value=0.001, initial=1.0)
    per_user_limit = forms.IntegerField(label=_("Per user limit"), min_value=0, required=False)
    confirm = forms.BooleanField(required=False, label=_("Apply even though running work would be preempted"))
    reason = forms.CharField(label=_("Reason"), required=False, max_length=2000)

    def __init__(self, *args, **kwargs):
        from apps.fleet.models import GpuModel

        super().__init__(*args, **kwargs)
        self.fields["gpu_model"].queryset = GpuModel.objects.all()


class TierForm(forms.Form):
    value = forms.IntegerField(label=_("Value"))
    preemptible = forms.BooleanField(label=_("Preemptible"), required=False)
    may_borrow = forms.BooleanField(label=_("May borrow"), required=False)
    description = forms.CharField(label=_("Description"), required=False, max_length=300)
    reason = forms.CharField(label=_("Reason"), required=False, max_length=2000)
