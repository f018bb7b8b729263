"""Forms for the account pages. They only shape input; the services decide and validate the rest."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import Tenant, User
from apps.accounts.roles import SERVICE_ACCOUNT_ROLE_CHOICES, Role


class TenantChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Tenant) -> str:
        return f"{'— ' * obj.depth}{obj.name} ({obj.slug})"


class TokenForm(forms.Form):
    name = forms.CharField(
        label=_("Name"), max_length=100, help_text=_("What uses it, e.g. 'gitlab-ci train-pipeline'.")
    )
    user = forms.ModelChoiceField(
        label=_("User"),
        queryset=User.objects.none(),
        required=False,
        empty_label=_("Myself"),
        help_text=_("Or a service account of a tenant you manage."),
    )
    tenant = TenantChoiceField(
        label=_("Tenant"), queryset=Tenant.objects.none(), required=False, empty_label=_("Console-wide")
    )
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER)
    expires_in_days = forms.IntegerField(
        label=_("Expires in days"),
        min_value=1,
        max_value=3650,
        required=False,
        initial=90,
        help_text=_("Empty: never expires."),
    )

    def __init__(self, *args, user: User, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = Tenant.objects.for_user(user, "view")
        # Most tokens are for one team: preselect the user's first tenant rather than "Console-wide".
        first = user.memberships.filter(tenant__isnull=False).order_by("tenant__path").values_list("tenant", flat=True)
        self.fields["tenant"].initial = first.first()
        self.fields["user"].queryset = User.objects.filter(
            is_service_account=True, owner_tenant__in=Tenant.objects.for_user(user, "manage").live()
        )


class MembershipForm(forms.Form):
    user = forms.ModelChoiceField(
        label=_("User"), queryset=User.objects.filter(is_active=True).order_by("username"), to_field_name="username"
    )
    tenant = TenantChoiceField(
        label=_("Tenant"), queryset=Tenant.objects.none(), required=False, empty_label=_("Console-wide")
    )
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER)
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)

    def __init__(self, *args, user: User, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = Tenant.objects.for_user(user, "manage").live()


class ServiceAccountForm(forms.Form):
    username = forms.CharField(label=_("Username"), max_length=150, help_text=_("e.g. ci-vision-team"))
    tenant = TenantChoiceField(label=_("Tenant"), queryset=Tenant.objects.none())
    role = forms.ChoiceField(label=_("Role"), choices=SERVICE_ACCOUNT_ROLE_CHOICES, initial=Role.MEMBER)
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)

    def __init__(self, *args, user: User, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = Tenant.objects.for_user(user, "manage").live()


class ReasonForm(forms.Form):
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)
