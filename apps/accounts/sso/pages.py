"""The group mappings page (platform admins): the mappings, a form to add one, and a preview of what a list of
groups, or a person's groups from their last log-in, would give today (docs/sso.md, "Roles from groups")."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from apps.accounts import services
from apps.accounts.forms import GroupMappingForm, ReasonForm
from apps.accounts.group_mappings import plan_memberships, roles_from_groups
from apps.accounts.models import GroupMapping, Tenant, User
from apps.accounts.permissions import has_perm
from apps.core.errors import ServiceError
from apps.core.forms import apply_service_error

# People offered in the preview's name field (the field takes any name).
PEOPLE_LISTED = 500


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
    person_name = request.GET.get("person", "").strip()
    groups = [line.strip() for line in typed.splitlines() if line.strip()]
    person = None
    if person_name:
        person = User.objects.filter(username=person_name, is_service_account=False).first()
        if person is None:
            messages.error(request, _("No person is called %(name)s.") % {"name": person_name})
        else:
            groups = person.idp_groups
    return render(
        request,
        "accounts/group_mappings.html",
        {
            "mappings": GroupMapping.objects.select_related("tenant"),
            "form": form,
            "groups_typed": typed,
            "person": person,
            "person_name": person_name,
            "sso_people": User.objects.exclude(oidc_subject="")
            .order_by("username")
            .values_list("username", flat=True)[:PEOPLE_LISTED],
            "preview": _preview(groups, person) if groups or person else None,
        },
        status=400 if request.method == "POST" else 200,
    )


def _preview(groups: list[str], person: User | None) -> list[dict]:
    """What a log-in with `groups` would do today: one row per place, for `person`'s memberships if named."""
    held = {m.tenant_id: m for m in person.memberships.select_related("tenant")} if person else {}
    steps = plan_memberships(held, roles_from_groups(groups))
    ids = {s.tenant_id for s in steps if s.tenant_id}
    slugs = dict(Tenant.objects.filter(id__in=ids).values_list("id", "slug"))
    rows = [{"tenant": slugs.get(s.tenant_id, ""), "step": s} for s in steps]
    return sorted(rows, key=lambda r: r["tenant"])


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
