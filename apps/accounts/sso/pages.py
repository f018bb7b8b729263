"""The group mappings page (platform admins): the mappings, a form to add one, and a preview of what a list of
groups would give today (docs/sso.md, "Roles from groups")."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from apps.accounts import services
from apps.accounts.forms import GroupMappingForm, ReasonForm
from apps.accounts.group_mappings import roles_from_groups
from apps.accounts.models import GroupMapping, Tenant
from apps.accounts.permissions import has_perm
from apps.core.errors import ServiceError
from apps.core.forms import apply_service_error


def _require_admin(request) -> None:
    if not has_perm(request.user, "administer"):
        raise PermissionDenied(_("Only platform admins map identity provider groups to roles."))


@login_required
def group_mappings(request):
    _require_admin(request)
    form = GroupMappingForm(request.POST or None, auto_id="mapping_%s")
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            mapping = services.create_group_mapping(
                request.user, group=data["group"], tenant=data["tenant"], role=data["role"], reason=data["reason"]
            )
        except ServiceError as exc:
            apply_service_error(form, exc)
        else:
            messages.success(request, _("Mapped %(group)s.") % {"group": mapping.group})
            return redirect("accounts:group_mappings")
    typed = request.GET.get("groups", "")
    groups = [line.strip() for line in typed.splitlines() if line.strip()]
    preview = None
    if groups:
        grants = roles_from_groups(groups)
        names = dict(Tenant.objects.filter(id__in=[k for k in grants if k]).values_list("id", "slug"))
        preview = sorted(((names.get(k) or "", g.role, g.group) for k, g in grants.items()), key=lambda r: r[0])
    return render(
        request,
        "accounts/group_mappings.html",
        {
            "mappings": GroupMapping.objects.select_related("tenant"),
            "form": form,
            "groups_typed": typed,
            "preview": preview,
        },
        status=400 if request.method == "POST" else 200,
    )


@require_POST
@login_required
def group_mapping_delete(request, pk: int):
    _require_admin(request)
    mapping = get_object_or_404(GroupMapping, pk=pk)
    form = ReasonForm(request.POST)
    form.is_valid()
    try:
        services.delete_group_mapping(request.user, mapping, reason=form.cleaned_data.get("reason", ""))
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Removed the mapping of %(group)s.") % {"group": mapping.group})
    return redirect("accounts:group_mappings")
