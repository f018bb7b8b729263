"""Account pages: log in/out, profile, memberships, service accounts, API tokens, the tenant switcher."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST, require_safe

from apps.accounts import services
from apps.accounts.filtersets import ApiTokenFilterSet, MembershipFilterSet
from apps.accounts.forms import LoginForm, MembershipForm, ReasonForm, ServiceAccountForm, TokenForm
from apps.accounts.middleware import SESSION_KEY
from apps.accounts.models import ApiToken, Membership, Tenant, User
from apps.accounts.permissions import allowed_tenant_ids, has_perm, scope_for
from apps.accounts.sso import enabled as sso_enabled
from apps.accounts.sso.views import end_session_url
from apps.core.errors import ServiceError
from apps.core.forms import apply_service_error
from apps.core.tables import Column
from apps.core.value_labels import value_label
from apps.core.views import ScopedListView


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True
    authentication_form = LoginForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        if sso_enabled():
            context["sso_label"] = settings.OIDC_BUTTON_LABEL or _("Log in with single sign-on")
        return context

    def form_valid(self, form):
        response = super().form_valid(form)
        services.record_login(form.get_user())
        return response


class LogoutView(auth_views.LogoutView):
    def post(self, request, *args, **kwargs):
        provider_logout = ""
        if request.user.is_authenticated:
            provider_logout = end_session_url(request)  # read before the session is flushed
            services.record_logout(request.user)
        response = super().post(request, *args, **kwargs)
        # Logged in through the identity provider: end its session too (RP-initiated logout), which sends the
        # browser back to the log-in page.
        return redirect(provider_logout) if provider_logout else response


@require_safe
@login_required
def profile(request):
    scope = scope_for(request.user)
    names = dict(Tenant.objects.filter(id__in=scope.tenant_actions).values_list("id", "slug"))
    per_tenant = sorted((names.get(t, t), sorted(a)) for t, a in scope.tenant_actions.items())
    return render(
        request,
        "accounts/profile.html",
        {
            "memberships": request.user.memberships.select_related("tenant"),
            "global_actions": sorted(scope.global_actions),
            "per_tenant": per_tenant,
        },
    )


@require_POST
@login_required
def switch_tenant(request):
    """Remember the tenant to work in (a session preference, not console state: no audit event)."""
    slug = request.POST.get("tenant", "")
    if slug:
        tenant = get_object_or_404(Tenant.objects.for_user(request.user, "view"), slug=slug)
        request.session[SESSION_KEY] = tenant.pk
    else:
        request.session.pop(SESSION_KEY, None)
    target = request.POST.get("next") or reverse("dashboard:home")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("dashboard:home")
    return redirect(target)


class MembershipListView(ScopedListView):
    model = Membership
    filterset_class = MembershipFilterSet
    select_related = ("user", "tenant")
    template_name = "accounts/membership_list.html"
    columns = [
        Column("user", gettext_lazy("User"), order_by="user__username", csv="user.username"),
        Column(
            "tenant", gettext_lazy("Tenant"), order_by="tenant__path", csv=lambda m: m.tenant.slug if m.tenant else ""
        ),
        Column("role", gettext_lazy("Role"), order_by="role"),
        Column("since", gettext_lazy("Since"), order_by="created_at", csv="created_at"),
        Column("service_account", gettext_lazy("Service account"), csv="user.is_service_account", shown=False),
        Column("actions", gettext_lazy("Actions"), csv=False),
    ]
    csv_name = "memberships"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["can_manage"] = has_perm(self.request.user, "administer") or bool(
            allowed_tenant_ids(self.request.user, "manage")
        )
        context["form"] = kwargs.get("form") or MembershipForm(user=self.request.user, auto_id="grant_%s")
        context["service_account_form"] = kwargs.get("service_account_form") or ServiceAccountForm(
            user=self.request.user, auto_id="sa_%s"
        )
        context["role_choices"] = Membership._meta.get_field("role").choices
        context["can_map_groups"] = has_perm(self.request.user, "administer")
        return context

    def post(self, request, *args, **kwargs):
        form = MembershipForm(request.POST, user=request.user, auto_id="grant_%s")
        if form.is_valid():
            try:
                membership = services.grant_membership(request.user, **form.cleaned_data)
            except ServiceError as exc:
                apply_service_error(form, exc)
            else:
                messages.success(
                    request,
                    _("Granted %(role)s to %(user)s.")
                    % {"role": value_label(membership.role, "role"), "user": membership.user.username},
                )
                return redirect("accounts:memberships")
        self.object_list = self.get_queryset()
        return self.render_to_response(self.get_context_data(form=form, **self._filter_context()))

    def _filter_context(self):
        self.filterset = self.get_filterset(self.get_filterset_class())
        self.object_list = self.filterset.qs
        return {"filter": self.filterset, "object_list": self.object_list}


@require_POST
@login_required
def membership_change(request, pk: int):
    membership = get_object_or_404(Membership.objects.for_user(request.user, "view"), pk=pk)
    try:
        services.change_membership_role(
            request.user, membership, role=request.POST.get("role", ""), reason=request.POST.get("reason", "")
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            _("%(user)s is now %(role)s.")
            % {"user": membership.user.username, "role": value_label(membership.role, "role")},
        )
    return redirect("accounts:memberships")


@require_POST
@login_required
def membership_revoke(request, pk: int):
    membership = get_object_or_404(Membership.objects.for_user(request.user, "view"), pk=pk)
    try:
        services.revoke_membership(request.user, membership, reason=request.POST.get("reason", ""))
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            _("Revoked %(role)s from %(user)s.")
            % {"role": value_label(membership.role, "role"), "user": membership.user.username},
        )
    return redirect("accounts:memberships")


@require_POST
@login_required
def service_account_create(request):
    form = ServiceAccountForm(request.POST, user=request.user)
    if form.is_valid():
        try:
            account = services.create_service_account(request.user, **form.cleaned_data)
        except ServiceError as exc:
            apply_service_error(form, exc)
        else:
            messages.success(
                request,
                _("Created service account %(name)s. Create a token for it below.") % {"name": account.username},
            )
            return redirect("accounts:tokens")
    for field, errors in form.errors.items():
        messages.error(request, f"{field}: {' '.join(errors)}")
    return redirect("accounts:memberships")


class TokenListView(ScopedListView):
    model = ApiToken
    filterset_class = ApiTokenFilterSet
    select_related = ("user", "tenant")
    template_name = "accounts/token_list.html"
    tenant_field = None
    columns = [
        Column("name", gettext_lazy("Name"), order_by="name"),
        Column("prefix", gettext_lazy("Prefix"), order_by="prefix"),
        Column("user", gettext_lazy("User"), order_by="user__username", csv="user.username"),
        Column(
            "scope",
            gettext_lazy("Scope"),
            order_by=("role", "tenant__slug"),
            csv=lambda t: f"{t.role}@{t.tenant.slug if t.tenant else ''}",
        ),
        Column("status", gettext_lazy("Status"), order_by=("revoked_at", "expires_at")),
        Column("expires", gettext_lazy("Expires"), order_by="expires_at", csv="expires_at"),
        Column("last_used", gettext_lazy("Last used"), order_by="last_used_at", csv="last_used_at"),
        Column("actions", gettext_lazy("Actions"), csv=False),
    ]
    csv_name = "api-tokens"

    # The raw token survives exactly one redirect in the session, so a reload shows the list, not a new token.
    SESSION_NEW_TOKEN = "new_api_token"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.setdefault("form", TokenForm(user=self.request.user, auto_id="new_%s"))
        context.setdefault("new_token", self.request.session.pop(self.SESSION_NEW_TOKEN, None))
        context["service_accounts"] = User.objects.for_user(self.request.user, "manage").filter(is_service_account=True)
        return context

    def post(self, request, *args, **kwargs):
        form = TokenForm(request.POST, user=request.user, auto_id="new_%s")
        if form.is_valid():
            data = form.cleaned_data
            try:
                token, raw = services.issue_token(
                    request.user,
                    user=data["user"] or request.user,
                    name=data["name"],
                    tenant=data["tenant"],
                    role=data["role"],
                    expires_in_days=data["expires_in_days"],
                )
            except ServiceError as exc:
                apply_service_error(form, exc)
            else:
                request.session[self.SESSION_NEW_TOKEN] = raw
                messages.success(
                    request,
                    _("Created token %(name)s. Copy it now: it will not be shown again.") % {"name": token.name},
                )
                return redirect("accounts:tokens")
        self.filterset = self.get_filterset(self.get_filterset_class())
        self.object_list = self.filterset.qs
        return self.render_to_response(
            self.get_context_data(form=form, filter=self.filterset, object_list=self.object_list)
        )


@require_POST
@login_required
def token_revoke(request, pk: int):
    token = get_object_or_404(ApiToken.objects.for_user(request.user, "view"), pk=pk)
    form = ReasonForm(request.POST)
    form.is_valid()
    try:
        services.revoke_token(request.user, token, reason=form.cleaned_data.get("reason", ""))
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Revoked token %(name)s.") % {"name": token.name})
    return redirect("accounts:tokens")
