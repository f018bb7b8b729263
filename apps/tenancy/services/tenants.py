"""Services that change tenants. Each checks permission, validates, writes one audit event."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.models import Tenant
from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event, snapshot
from apps.core.errors import Conflict, InvalidInput, refuse_if_referenced

_EDITABLE = ("name", "slug", "parent", "description")


def _check_parent(actor, parent: Tenant | None) -> None:
    if parent is None:
        # Organizations (roots) are platform business.
        require(actor, Action.ADMINISTER, None, _("Only platform admins create or move top-level organizations."))
    else:
        require(actor, Action.MANAGE, parent, _("You may not manage tenant %(slug)s.") % {"slug": parent.slug})


def _validated(tenant: Tenant) -> None:
    # One validation path for UI and API: the model's own validators and constraints.
    try:
        tenant.full_clean(exclude=["path"], validate_unique=True, validate_constraints=False)
    except ValidationError as exc:
        raise InvalidInput(_("Invalid tenant."), exc.message_dict) from exc


def create_tenant(
    actor, *, name: str, slug: str, parent: Tenant | None = None, description: str = "", reason: str = ""
) -> Tenant:
    """Create an organization (no parent; platform admins) or a team under `parent` (its managers)."""
    _check_parent(actor, parent)
    tenant = Tenant(name=name, slug=slug, parent=parent, description=description)
    _validated(tenant)
    with transaction.atomic():
        try:
            tenant.save()
        except IntegrityError as exc:
            raise Conflict(
                _("A tenant with slug %(slug)s already exists.") % {"slug": repr(slug)}, {"slug": _("Already taken.")}
            ) from exc
        tenant.path = f"{parent.path if parent else '/'}{tenant.pk}/"
        tenant.save(update_fields=["path"])
        record_event(actor, "tenant.create", tenant, tenant=tenant, reason=reason, after=snapshot(tenant))
    return tenant


def update_tenant(actor, tenant: Tenant, *, reason: str = "", **changes) -> Tenant:
    """Rename, re-describe or move a tenant. Moving re-roots its whole subtree's paths."""
    unknown = set(changes) - set(_EDITABLE)
    if unknown:
        raise InvalidInput(_("Unknown fields."), {key: _("Unknown field.") for key in unknown})
    require(actor, Action.MANAGE, tenant, _("You may not manage tenant %(slug)s.") % {"slug": tenant.slug})
    before = snapshot(tenant)
    old_path = tenant.path
    if "parent" in changes and changes["parent"] != tenant.parent:
        new_parent = changes["parent"]
        if new_parent is not None and new_parent.is_descendant_of(tenant):
            raise InvalidInput(
                _("A tenant cannot move under itself or its own descendant."), {"parent": _("Would make a cycle.")}
            )
        _check_parent(actor, new_parent)
    for key, value in changes.items():
        setattr(tenant, key, value)
    _validated(tenant)
    with transaction.atomic():
        tenant.path = f"{tenant.parent.path if tenant.parent else '/'}{tenant.pk}/"
        try:
            tenant.save()
        except IntegrityError as exc:
            raise Conflict(_("A tenant with that slug already exists."), {"slug": _("Already taken.")}) from exc
        if tenant.path != old_path:
            descendants = list(Tenant.objects.filter(path__startswith=old_path).exclude(pk=tenant.pk))
            for child in descendants:
                child.path = tenant.path + child.path[len(old_path) :]
            Tenant.objects.bulk_update(descendants, ["path"])
        record_event(
            actor, "tenant.update", tenant, tenant=tenant, reason=reason, before=before, after=snapshot(tenant)
        )
    return tenant


def delete_tenant(actor, tenant: Tenant, *, reason: str = "") -> None:
    """Delete an empty tenant (no child tenants, no service accounts). Platform admins only."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins delete tenants."))
    if tenant.children.exists():
        raise Conflict(_("Delete or move the tenant's child tenants first."), {"tenant": _("Has child tenants.")})
    if tenant.service_accounts.exists():
        raise Conflict(_("Delete the tenant's service accounts first."), {"tenant": _("Has service accounts.")})
    with transaction.atomic():
        before = snapshot(tenant)
        record_event(actor, "tenant.delete", tenant, tenant=tenant, reason=reason, before=before)
        with refuse_if_referenced(tenant):
            tenant.delete()


def archive_tenant(actor, tenant: Tenant, *, reason: str = "") -> Tenant:
    """Archive a tenant that cannot be deleted for its history (statements, usage, audit): hidden from lists and
    pickers, read-only for everyone (`require` refuses any action but viewing), kept for its statements.
    Platform admins only; its teams first, and no work of its own pending or running."""
    from apps.tenancy.models import Admission, AdmissionState

    require(actor, Action.ADMINISTER, None, _("Only platform admins archive tenants."))
    if tenant.archived_at is not None:
        raise Conflict(_("Tenant %(slug)s is already archived.") % {"slug": tenant.slug}, code="archived")
    if tenant.children.live().exists():
        raise Conflict(_("Archive the tenant's teams first."), {"tenant": _("Has teams that are not archived.")})
    busy = Admission.objects.filter(
        queue__tenant=tenant, state__in=[AdmissionState.PENDING, AdmissionState.ADMITTED]
    ).count()
    if busy:
        raise Conflict(
            _("Tenant %(slug)s still has %(count)s workloads pending or running: cancel them first.")
            % {"slug": tenant.slug, "count": busy},
            {"tenant": _("Has work pending or running.")},
        )
    return _set_archived(actor, tenant, timezone.now(), "tenant.archive", reason)


def unarchive_tenant(actor, tenant: Tenant, *, reason: str = "") -> Tenant:
    """Make an archived tenant live again (platform admins; its parent first)."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins unarchive tenants."))
    if tenant.archived_at is None:
        raise Conflict(_("Tenant %(slug)s is not archived.") % {"slug": tenant.slug}, code="not_archived")
    if tenant.parent is not None and tenant.parent.archived_at is not None:
        raise Conflict(
            _("Unarchive its parent %(slug)s first.") % {"slug": tenant.parent.slug},
            {"tenant": _("The parent is archived.")},
        )
    return _set_archived(actor, tenant, None, "tenant.unarchive", reason)


def _set_archived(actor, tenant: Tenant, when, event: str, reason: str) -> Tenant:
    with transaction.atomic():
        before = snapshot(tenant)
        tenant.archived_at = when
        tenant.save(update_fields=["archived_at"])
        record_event(actor, event, tenant, tenant=tenant, reason=reason, before=before, after=snapshot(tenant))
    return tenant
