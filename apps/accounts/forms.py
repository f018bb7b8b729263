"""Forms for the account pages. They only shape input; the services decide and validate the rest."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import Tenant, User
from apps.accounts.roles import SERVICE_ACCOUNT_ROLE_CHOICES, Role

MAX_SUGGESTIONS = 500  # usernames offered on the grant form; any other is typed in full


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
        required=False,
        initial=90,
    )

    def __init__(self, *args, user: User, **kwargs):
        super().__init__(*args, **kwargs)
        max_days = settings.API_TOKEN_MAX_LIFETIME_DAYS
        self.fields["expires_in_days"].widget.attrs["max"] = max_days
        limit = {"days": max_days}
        self.fields["expires_in_days"].help_text = _("At most %(days)s days; empty: %(days)s days.") % limit
        self.fields["tenant"].queryset = Tenant.objects.for_user(user, "view")
        # Most tokens are for one team: preselect the user's first tenant rather than "Console-wide".
        first = user.memberships.filter(tenant__isnull=False).order_by("tenant__path").values_list("tenant", flat=True)
        self.fields["tenant"].initial = first.first()
        self.fields["user"].queryset = User.objects.filter(
            is_service_account=True, owner_tenant__in=Tenant.objects.for_user(user, "manage").live()
        )


class UsernameInput(forms.TextInput):
    """A username typed in, with `suggestions` offered as the browser's autocomplete (a datalist)."""

    suggestions: list[str] = []

    def render(self, name, value, attrs=None, renderer=None):
        list_id = f"{(attrs or {}).get('id') or name}_suggestions"
        field = super().render(name, value, {**(attrs or {}), "list": list_id, "autocomplete": "off"}, renderer)
        options = format_html_join("", '<option value="{}">', ((username,) for username in self.suggestions))
        return field + format_html('<datalist id="{}">{}</datalist>', list_id, options)


class MembershipForm(forms.Form):
    # Typed, not picked from every account of the console: the suggestions are the people the granter may already
    # see (docs/permissions.md, "users"), so another tenant's people and service accounts are never listed. Anyone
    # else (a new colleague with no role yet) is granted by exact username, as over the API.
    user = forms.CharField(
        label=_("User"),
        max_length=150,
        widget=UsernameInput,
        help_text=_("Their username; the people of your tenants are suggested."),
    )
    tenant = TenantChoiceField(
        label=_("Tenant"), queryset=Tenant.objects.none(), required=False, empty_label=_("Console-wide")
    )
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER)
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)

    def __init__(self, *args, user: User, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = Tenant.objects.for_user(user, "manage").live()
        self.fields["user"].widget.suggestions = list(
            User.objects.for_user(user, "view")
            .filter(is_active=True)
            .order_by("username")
            .values_list("username", flat=True)[:MAX_SUGGESTIONS]
        )

    def clean_user(self) -> User:
        username = self.cleaned_data["user"].strip()
        found = User.objects.filter(is_active=True, username=username).first()
        if found is None:
            raise forms.ValidationError(_("No active user %(username)s.") % {"username": username})
        return found


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


class LoginForm(AuthenticationForm):
    """The password log-in. With LOCAL_LOGIN off it says at once that only single sign-on is open (break-glass
    accounts excepted), before any password is checked; BreakGlassBackend enforces the same for every log-in."""

    def clean(self):
        from apps.accounts.sso.backend import local_login_allowed

        if not local_login_allowed(self.cleaned_data.get("username")):
            raise forms.ValidationError(
                _("Password log-in is off: log in with single sign-on."), code="local_login_off"
            )
        return super().clean()


class GroupMappingForm(forms.Form):
    group = forms.CharField(
        label=_("Group or pattern"), max_length=255, help_text=_("e.g. gpu-admins, gpu:{tenant}:{role}")
    )
    tenant = forms.ModelChoiceField(
        label=_("Tenant"), queryset=Tenant.objects.all(), to_field_name="slug", required=False
    )
    role = forms.ChoiceField(label=_("Role"), choices=[("", "—"), *Role.choices], required=False)
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)
