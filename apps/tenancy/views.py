"""Tenant pages: the tree, one tenant with its members and children, create and edit."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from apps.accounts.models import Membership
from apps.accounts.permissions import allowed_tenant_ids, has_perm
from apps.core.errors import ServiceError
from apps.core.forms import apply_service_error
from apps.core.views import ScopedListView
from apps.tenancy import services
from apps.tenancy.filtersets import TenantFilterSet
from apps.tenancy.forms import TenantForm
from apps.tenancy.models import Tenant


class TenantListView(ScopedListView):
    model = Tenant
    filterset_class = TenantFilterSet
    select_related = ("parent",)
    template_name = "tenancy/tenant_list.html"
    tenant_field = None

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        context["can_create"] = has_perm(user, "administer") or bool(allowed_tenant_ids(user, "manage"))
        return context


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def tenant_create(request):
    form = TenantForm(request.POST or None, user=request.user, initial={"parent": request.GET.get("parent")})
    if request.method == "POST" and form.is_valid():
        try:
            tenant = services.create_tenant(request.user, **form.cleaned_data)
        except ServiceError as exc:
            apply_service_error(form, exc)
        else:
            messages.success(request, f"Created tenant {tenant.name}.")
            return redirect("tenancy:tenant_detail", slug=tenant.slug)
    return render(request, "tenancy/tenant_form.html", {"form": form, "title": "New tenant"})


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def tenant_detail(request, slug: str):
    tenant = get_object_or_404(Tenant.objects.for_user(request.user, "view").select_related("parent"), slug=slug)
    can_manage = has_perm(request.user, "manage", tenant)
    form = None
    if can_manage:
        form = TenantForm(request.POST or None, instance=tenant, user=request.user)
        form.fields["parent"].queryset = form.fields["parent"].queryset.exclude(path__startswith=tenant.path)
        if request.method == "POST" and form.is_valid():
            data = dict(form.cleaned_data)
            reason = data.pop("reason", "")
            fresh = Tenant.objects.get(pk=tenant.pk)  # the form mutated `tenant`; the service diffs from the DB
            try:
                tenant = services.update_tenant(request.user, fresh, reason=reason, **data)
            except ServiceError as exc:
                apply_service_error(form, exc)
            else:
                messages.success(request, "Saved.")
                return redirect("tenancy:tenant_detail", slug=tenant.slug)
    return render(
        request,
        "tenancy/tenant_detail.html",
        {
            "tenant": tenant,
            "form": form,
            "can_manage": can_manage,
            "children": Tenant.objects.for_user(request.user, "view").filter(parent=tenant),
            "memberships": Membership.objects.filter(tenant=tenant).select_related("user")[:200],
            "ancestors": Tenant.objects.filter(id__in=tenant.ancestor_ids()[:-1]).order_by("path"),
        },
    )
