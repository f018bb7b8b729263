from django import forms

from apps.accounts.forms import TenantChoiceField
from apps.tenancy.models import Tenant


class TenantForm(forms.ModelForm):
    """Name, slug, parent and description; the service checks who may put a tenant where."""

    parent = TenantChoiceField(queryset=Tenant.objects.none(), required=False, empty_label="(top-level organization)")
    reason = forms.CharField(max_length=2000, required=False)

    class Meta:
        model = Tenant
        fields = ["name", "slug", "parent", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["parent"].queryset = Tenant.objects.for_user(user, "manage")

    def validate_unique(self):
        # Uniqueness is checked by the service, which reports it as a field error.
        pass
