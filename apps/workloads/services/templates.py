"""Workload templates: save a spec under a name (each change a new version), submit from one."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from apps.accounts.models import Tenant
from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event, snapshot
from apps.core.errors import InvalidInput
from apps.workloads.models import Workload, WorkloadTemplate
from apps.workloads.services.submission import parse, submit_workload


def save_template(
    actor, *, tenant: Tenant, name: str, kind: str, spec: dict, description: str = ""
) -> WorkloadTemplate:
    """Save a template; an existing name gets a new version (old versions stay for what used them)."""
    require(actor, Action.SUBMIT, tenant, _("You may not save templates for tenant %(slug)s.") % {"slug": tenant.slug})
    if not name or len(name) > 100:
        raise InvalidInput(_("Name the template (1 to 100 characters)."), {"name": _("1 to 100 characters.")})
    parse(kind, {**spec, "tenant": tenant.slug})
    with transaction.atomic():
        latest = WorkloadTemplate.objects.filter(tenant=tenant, name=name).order_by("-version").first()
        template = WorkloadTemplate.objects.create(
            tenant=tenant,
            name=name,
            kind=kind,
            spec=spec,
            description=description,
            version=(latest.version + 1) if latest else 1,
            created_by=actor if actor.pk else None,
        )
        record_event(actor, "template.save", template, tenant=tenant, after=snapshot(template))
    return template


def submit_from_template(
    actor, template: WorkloadTemplate, *, overrides: dict | None = None, idempotency_key: str | None = None
) -> tuple[Workload, bool]:
    """Submit the template's spec with `overrides` applied (the submission records which template it came from)."""
    from apps.workloads.specs import apply_overrides

    spec = apply_overrides({**template.spec, "tenant": template.tenant.slug}, overrides or {})
    return submit_workload(actor, kind=template.kind, spec=spec, idempotency_key=idempotency_key, template=template)
