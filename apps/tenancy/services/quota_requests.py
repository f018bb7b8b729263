"""Quota requests: a tenant admin asks, a platform admin decides; approval applies through the quota service."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event, snapshot
from apps.core.errors import Conflict, InvalidInput
from apps.fleet.models import GpuModel
from apps.tenancy.models import Queue, Quota, QuotaRequest, QuotaRequestState
from apps.tenancy.services.quotas import apply_quota


def request_quota(
    actor, *, queue: Queue, gpu_model: GpuModel, guaranteed: int, borrow_limit: int | None = None, justification: str
) -> QuotaRequest:
    """Ask for a new guarantee (the total wanted) for one model of a queue you manage."""
    require(actor, Action.MANAGE, queue.tenant, _("You may not manage tenant %(slug)s.") % {"slug": queue.tenant.slug})
    errors = {}
    if not isinstance(guaranteed, int) or isinstance(guaranteed, bool) or guaranteed < 0:
        errors["guaranteed"] = "A whole number of GPUs, 0 or more."
    if borrow_limit is not None and (not isinstance(borrow_limit, int) or borrow_limit < 0):
        errors["borrow_limit"] = "A whole number of GPUs, 0 or more."
    if not justification or not justification.strip():
        errors["justification"] = "Say why the team needs it."
    if errors:
        raise InvalidInput(_("Invalid quota request."), errors)
    with transaction.atomic():
        request = QuotaRequest.objects.create(
            queue=queue,
            gpu_model=gpu_model,
            guaranteed=guaranteed,
            borrow_limit=borrow_limit,
            justification=justification.strip(),
            requested_by=actor if actor.pk else None,
        )
        record_event(actor, "quota_request.create", request, tenant=queue.tenant, after=snapshot(request))
    return request


def decide_quota_request(
    actor, request: QuotaRequest, *, approve: bool, granted: int | None = None, reason: str = "", confirm: bool = False
) -> QuotaRequest:
    """Approve (in full, or in part with `granted`) or reject with a reason (platform admins)."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins decide quota requests."))
    if request.state != QuotaRequestState.PENDING:
        raise Conflict(
            _("This request was already %(state)s.") % {"state": request.state}, {"state": _("Already decided.")}
        )
    if not approve and not reason.strip():
        raise InvalidInput(_("Say why the request is rejected."), {"reason": _("Required when rejecting.")})
    before = snapshot(request)
    with transaction.atomic():
        if approve:
            amount = request.guaranteed if granted is None else granted
            if not isinstance(amount, int) or isinstance(amount, bool) or not 0 <= amount <= request.guaranteed:
                raise InvalidInput(
                    _("Grant between 0 and the %(guaranteed)s asked for.") % {"guaranteed": request.guaranteed},
                    {"granted": _("0 to %(guaranteed)s.") % {"guaranteed": request.guaranteed}},
                )
            current = Quota.objects.filter(queue=request.queue, gpu_model=request.gpu_model).first()
            values = {"guaranteed": amount}
            if current is not None:
                values.update(
                    borrow_limit=current.borrow_limit,
                    lend_limit=current.lend_limit,
                    weight=current.weight,
                    per_user_limit=current.per_user_limit,
                )
            if request.borrow_limit is not None:
                values["borrow_limit"] = request.borrow_limit
            if values.get("lend_limit") is not None and values["lend_limit"] > amount:
                values["lend_limit"] = amount
            quota, impact, quota_before = apply_quota(request.queue, request.gpu_model, values, confirm=confirm)
            request.state = QuotaRequestState.APPROVED if amount == request.guaranteed else QuotaRequestState.PARTIAL
            request.granted = amount
            extra = {"quota_before": quota_before, "quota_after": snapshot(quota), "impact": impact}
        else:
            request.state = QuotaRequestState.REJECTED
            extra = {}
        request.decided_by = actor if actor.pk else None
        request.decided_at = timezone.now()
        request.decision_reason = reason.strip()
        request.save()
        record_event(
            actor,
            f"quota_request.{request.state}",
            request,
            tenant=request.queue.tenant,
            reason=reason,
            before=before,
            after={**snapshot(request), **extra},
        )
        if approve:
            from apps.tenancy.tasks import admission_pass_task

            transaction.on_commit(lambda: admission_pass_task.delay())
    return request
