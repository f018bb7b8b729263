"""Queues, their cluster bindings, quotas per GPU model, guarantee caps and priority tiers."""

from __future__ import annotations

import math
import re
from collections import defaultdict

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from apps.accounts.models import Tenant
from apps.accounts.permissions import has_perm, require
from apps.accounts.roles import Action
from apps.audit.services import record_event, snapshot
from apps.backends.shares import SHARE_UNITS, format_share, gpus_number
from apps.core import refcache
from apps.core.errors import Conflict, Forbidden, InvalidInput, refuse_if_referenced
from apps.fleet.models import Cluster, GpuModel
from apps.tenancy.admission import UNLIMITED, Impact, preview_quota_change
from apps.tenancy.models import GuaranteeCap, PriorityTier, Queue, QueueBinding, Quota

_SLURM_ACCOUNT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _clean(instance, message: str) -> None:
    try:
        instance.full_clean(validate_constraints=False)
    except ValidationError as exc:
        raise InvalidInput(message, exc.message_dict) from exc


def _enqueue_admission_pass() -> None:
    from apps.tenancy.tasks import admission_pass_task

    transaction.on_commit(lambda: admission_pass_task.delay())


#
# Queues
#


def create_queue(actor, *, tenant: Tenant, name: str, description: str = "", reason: str = "") -> Queue:
    """A new queue in `tenant` (its managers)."""
    require(actor, Action.MANAGE, tenant, _("You may not manage tenant %(slug)s.") % {"slug": tenant.slug})
    queue = Queue(tenant=tenant, name=name, description=description)
    _clean(queue, _("Invalid queue."))
    with transaction.atomic():
        try:
            with transaction.atomic():
                queue.save()
        except IntegrityError as exc:
            raise Conflict(
                _("%(slug)s already has a queue named %(name)s.") % {"slug": tenant.slug, "name": repr(name)},
                {"name": _("Already taken.")},
            ) from exc
        record_event(actor, "queue.create", queue, tenant=tenant, reason=reason, after=snapshot(queue))
    return queue


def update_queue(actor, queue: Queue, *, description: str, reason: str = "") -> Queue:
    require(actor, Action.MANAGE, queue.tenant, _("You may not manage tenant %(slug)s.") % {"slug": queue.tenant.slug})
    before = snapshot(queue)
    queue.description = description
    _clean(queue, _("Invalid queue."))
    with transaction.atomic():
        queue.save(update_fields=["description"])
        record_event(
            actor, "queue.update", queue, tenant=queue.tenant, reason=reason, before=before, after=snapshot(queue)
        )
    return queue


def delete_queue(actor, queue: Queue, *, reason: str = "") -> None:
    """Delete a queue that holds no admitted or pending work."""
    require(actor, Action.MANAGE, queue.tenant, _("You may not manage tenant %(slug)s.") % {"slug": queue.tenant.slug})
    if queue.admissions.filter(state__in=["pending", "admitted"]).exists():
        raise Conflict(_("The queue still has pending or running work."), {"queue": _("Not empty.")})
    with transaction.atomic():
        record_event(actor, "queue.delete", queue, tenant=queue.tenant, reason=reason, before=snapshot(queue))
        with refuse_if_referenced(queue):
            queue.quotas.all().delete()
            queue.delete()


MAX_NAMESPACES = 100  # a queue's namespaces on one cluster; each is a Kueue LocalQueue or a Volcano binding


def bind_queue(
    actor,
    queue: Queue,
    *,
    cluster: Cluster,
    namespaces: list[str] | None = None,
    slurm_account: str = "",
    reason: str = "",
) -> QueueBinding:
    """Bind a queue on one cluster to Kubernetes namespaces and/or a Slurm account (platform admins)."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins bind queues to clusters."))
    namespaces = list(namespaces or [])
    if len(namespaces) > MAX_NAMESPACES:
        raise InvalidInput(
            _("Bind at most %(max)s namespaces on one cluster.") % {"max": MAX_NAMESPACES},
            {"namespaces": _("At most %(max)s.") % {"max": MAX_NAMESPACES}},
        )
    bad = [ns for ns in namespaces if not isinstance(ns, str) or not _DNS_LABEL.match(ns)]
    if bad:
        raise InvalidInput(
            _("Namespaces must be DNS-1123 labels."),
            {"namespaces": _("Not valid: %(values)s") % {"values": ", ".join(map(str, bad))}},
        )
    if slurm_account and not _SLURM_ACCOUNT.match(slurm_account):
        raise InvalidInput(
            _("Invalid Slurm account name."),
            {"slurm_account": _("Lower-case letters, digits, '-' and '_', at most 63 characters.")},
        )
    if not namespaces and not slurm_account:
        raise InvalidInput(_("Bind at least one namespace or a Slurm account."), {"namespaces": _("Required.")})
    taken = QueueBinding.objects.filter(cluster=cluster).exclude(queue=queue)
    clash = [ns for ns in namespaces if any(ns in (b.namespaces or []) for b in taken)]
    if clash:
        raise Conflict(
            _("Namespace %(clash)s is already bound to another queue on %(name)s.")
            % {"clash": clash[0], "name": cluster.name},
            {"namespaces": _("Already bound.")},
        )
    with transaction.atomic():
        binding, created = QueueBinding.objects.get_or_create(queue=queue, cluster=cluster)
        before = None if created else snapshot(binding)
        binding.namespaces, binding.slurm_account = namespaces, slurm_account
        binding.save()
        record_event(
            actor, "queue.bind", binding, tenant=queue.tenant, reason=reason, before=before, after=snapshot(binding)
        )
    return binding


#
# Guarantee caps and quotas (pages and messages call a cap the tenant's budget)
#


def _subtree_totals(model: GpuModel, overrides: dict[tuple[str, int], int]) -> tuple[dict[int, int], dict[int, int]]:
    """(guarantee each tenant's subtree holds, cap per tenant) for one model, with pending changes applied.

    A child with a cap counts as its cap (it has reserved that much of its parent); without
    one it counts as what its queues and descendants hold.
    """
    tenants = list(Tenant.objects.values_list("id", "parent_id", "path"))
    caps = dict(GuaranteeCap.objects.filter(gpu_model=model).values_list("tenant_id", "guaranteed"))
    own: dict[int, int] = defaultdict(int)
    for queue_id, tenant_id, g in Quota.objects.filter(gpu_model=model).values_list(
        "queue_id", "queue__tenant_id", "guaranteed"
    ):
        own[tenant_id] += overrides.pop(("quota", queue_id), g)
    for (kind, key), value in list(overrides.items()):
        if kind == "quota":  # a new quota row
            own[Queue.objects.values_list("tenant_id", flat=True).get(pk=key)] += value
        elif kind == "cap":
            caps[key] = value
    totals: dict[int, int] = {}
    for tenant_id, _parent, _path in sorted(tenants, key=lambda t: -t[2].count("/")):  # deepest first
        children = [t for t in tenants if t[1] == tenant_id]
        totals[tenant_id] = own[tenant_id] + sum(caps.get(c[0], totals.get(c[0], 0)) for c in children)
    return totals, caps


def _check_caps(model: GpuModel, overrides: dict[tuple[str, int], int], field: str) -> None:
    totals, caps = _subtree_totals(model, dict(overrides))
    names = dict(Tenant.objects.filter(id__in=caps).values_list("id", "slug"))
    for tenant_id, cap in caps.items():
        if totals.get(tenant_id, 0) > cap:
            raise InvalidInput(
                _(
                    "%(tenant)s's %(model)s guarantees would total %(total)s, above its budget of %(budget)s; "
                    "a child's guarantees must fit inside its parent's."
                )
                % {"tenant": names[tenant_id], "model": model.code, "total": totals[tenant_id], "budget": cap},
                {
                    field: _("Exceeds %(names)s's budget of %(budget)s %(code)s.")
                    % {"names": names[tenant_id], "budget": cap, "code": model.code}
                },
            )


def _bounded_by_cap(tenant: Tenant, model: GpuModel) -> bool:
    return GuaranteeCap.objects.filter(tenant_id__in=tenant.ancestor_ids(), gpu_model=model).exists()


def set_guarantee_cap(actor, *, tenant: Tenant, gpu_model: GpuModel, guaranteed: int, reason: str = "") -> GuaranteeCap:
    """Set a tenant's guarantee cap (its budget, to users) for one model: platform admins for organizations, the
    parent's managers for teams. Audited as "budget.set"."""
    if tenant.parent_id is None:
        require(actor, Action.ADMINISTER, None, _("Only platform admins set an organization's budget."))
    else:
        require(actor, Action.MANAGE, tenant.parent, _("You may not manage %(slug)s.") % {"slug": tenant.parent.slug})
    if not isinstance(guaranteed, int) or isinstance(guaranteed, bool) or guaranteed < 0:
        raise InvalidInput(_("A budget is a whole number of GPUs, 0 or more."), {"guaranteed": _("0 or more.")})
    _check_caps(gpu_model, {("cap", tenant.pk): guaranteed}, "guaranteed")
    with transaction.atomic():
        cap, created = GuaranteeCap.objects.get_or_create(
            tenant=tenant, gpu_model=gpu_model, defaults={"guaranteed": guaranteed}
        )
        before = None if created else snapshot(cap)
        cap.guaranteed = guaranteed
        cap.save()
        record_event(actor, "budget.set", cap, tenant=tenant, reason=reason, before=before, after=snapshot(cap))
    return cap


def _validate_quota(values: dict) -> None:
    errors = {}
    for key in ("guaranteed", "borrow_limit", "lend_limit", "per_user_limit"):
        value = values.get(key)
        if value is None and key != "guaranteed":
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            errors[key] = "A whole number of GPUs, 0 or more."
    weight = values.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
        errors["weight"] = "A positive number."
    if not errors and values.get("lend_limit") is not None and values["lend_limit"] > values["guaranteed"]:
        errors["lend_limit"] = f"Cannot lend more than the guarantee ({values['guaranteed']})."
    if errors:
        raise InvalidInput(_("Invalid quota."), errors)


def _impact(queue: Queue, model: GpuModel, values: dict) -> Impact:
    from apps.tenancy.snapshot import build_snapshot

    snap, _unused = build_snapshot(with_capacity=False)
    borrow = values.get("borrow_limit")
    return preview_quota_change(
        snap,
        queue.pk,
        model.code,
        guaranteed=values["guaranteed"],
        borrow_limit=UNLIMITED if borrow is None else borrow,
        lend_limit=values.get("lend_limit"),
    )


def impact_summary(impact: Impact) -> dict:
    from apps.tenancy.models import Admission

    names = dict(Admission.objects.filter(pk__in=[h for h, _gpus in impact.preempt]).values_list("pk", "name"))
    queues = {q.pk: str(q) for q in Queue.objects.filter(pk__in=impact.lose_borrowed).select_related("tenant")}
    return {
        "preempt": [
            {
                "admission": h,
                "name": names.get(h, str(h)),
                "gpus": gpus_number(g),
                "gpus_text": format_share(g, SHARE_UNITS),
            }
            for h, g in impact.preempt
        ],
        "lose_borrowed": [
            {"queue": queues.get(q, str(q)), "gpus": gpus_number(n)} for q, n in impact.lose_borrowed.items()
        ],
        "notes": impact.notes,
        "text": describe_impact(impact, names, queues),
    }


def describe_impact(impact: Impact, names: dict, queues: dict) -> str:
    parts = []
    if impact.preempt:
        jobs = ", ".join(names.get(h, str(h)) for h, _gpus in impact.preempt)
        parts.append(
            ngettext(
                "%(count)s running workload would be preempted (%(jobs)s)",
                "%(count)s running workloads would be preempted (%(jobs)s)",
                len(impact.preempt),
            )
            % {"count": len(impact.preempt), "jobs": jobs}
        )
    for queue, units in impact.lose_borrowed.items():
        n = gpus_number(units)
        parts.append(
            ngettext(
                "%(queue)s would lose %(count)s borrowed GPU",
                "%(queue)s would lose %(count)s borrowed GPUs",
                math.ceil(n),
            )
            % {"queue": queues.get(queue, queue), "count": format_share(units, SHARE_UNITS)}
        )
    return "; ".join(parts) or _("nothing running is affected")


def preview_quota(actor, queue: Queue, gpu_model: GpuModel, **values) -> dict:
    """What a quota change would do, without doing it (anyone who may view the tenant).

    It runs the checks the change itself runs (`check_quota`): a change the real request would refuse (a budget
    exceeded, nothing to borrow from) is refused here with the same error, not previewed as harmless.
    """
    require(actor, Action.VIEW, queue.tenant, _("You may not view tenant %(slug)s.") % {"slug": queue.tenant.slug})
    _values, impact = check_quota(queue, gpu_model, {"guaranteed": values.get("guaranteed", 0), **values})
    return impact_summary(impact)


def check_quota(queue: Queue, gpu_model: GpuModel, values: dict) -> tuple[dict, Impact]:
    """Every check a quota change passes before it is written (values, lenders, the guarantee caps of the
    tenant's ancestors), and its impact on running work. Writes nothing: the what-if and the change both run it.

    Returns (the values with their defaults, the impact); raises InvalidInput naming the field when refused.
    """
    values = {"weight": 1.0, "borrow_limit": None, "lend_limit": None, "per_user_limit": None, **values}
    _validate_quota(values)
    others = Quota.objects.filter(gpu_model=gpu_model, guaranteed__gt=0).exclude(queue=queue).exists()
    if values["borrow_limit"] and not others:
        raise InvalidInput(
            _(
                "Nothing to borrow from: no other queue has a %(model)s guarantee (a borrow limit needs a "
                "cohort of lenders)."
            )
            % {"model": gpu_model.code},
            {"borrow_limit": _("No lenders for this GPU model.")},
        )
    _check_caps(gpu_model, {("quota", queue.pk): values["guaranteed"]}, "guaranteed")
    return values, _impact(queue, gpu_model, values)


def apply_quota(queue: Queue, gpu_model: GpuModel, values: dict, *, confirm: bool) -> tuple[Quota, dict, dict | None]:
    """Validate against guarantee caps and running work (`check_quota`), then write the row. No permission check,
    no audit: callers do both.

    Returns (quota, impact summary, snapshot before). A disruptive change without `confirm` raises Conflict
    with the impact in `data`.
    """
    values, impact = check_quota(queue, gpu_model, values)
    existing = Quota.objects.filter(queue=queue, gpu_model=gpu_model).first()
    summary = impact_summary(impact)
    if impact.disruptive and not confirm:
        raise Conflict(
            _("This change would preempt running work: %(summary)s. Confirm to apply it.")
            % {"summary": summary["text"]},
            {"confirm": _("Required: the change preempts running work.")},
            code="needs_confirmation",
            data={"impact": summary},
        )
    before = snapshot(existing) if existing else None
    with transaction.atomic():
        quota, _created = Quota.objects.update_or_create(queue=queue, gpu_model=gpu_model, defaults=values)
    return quota, summary, before


def set_quota(
    actor,
    *,
    queue: Queue,
    gpu_model: GpuModel,
    guaranteed: int,
    borrow_limit: int | None = None,
    lend_limit: int | None = None,
    weight: float = 1.0,
    per_user_limit: int | None = None,
    confirm: bool = False,
    reason: str = "",
) -> tuple[Quota, dict]:
    """Set a queue's quota for one GPU model. Managers of the tenant, within a guarantee cap an ancestor holds;
    platform admins anywhere. A change that would preempt running work needs `confirm=True`."""
    require(actor, Action.MANAGE, queue.tenant, _("You may not manage tenant %(slug)s.") % {"slug": queue.tenant.slug})
    if not has_perm(actor, Action.ADMINISTER) and not _bounded_by_cap(queue.tenant, gpu_model):
        raise Forbidden(
            _("No %(model)s budget covers %(tenant)s: ask a platform admin for one (or file a quota request).")
            % {"model": gpu_model.code, "tenant": queue.tenant.slug}
        )
    values = {
        "guaranteed": guaranteed,
        "borrow_limit": borrow_limit,
        "lend_limit": lend_limit,
        "weight": weight,
        "per_user_limit": per_user_limit,
    }
    with transaction.atomic():
        if connection.vendor == "postgresql":  # one quota change at a time: caps are checked over many rows
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(4242)")
        quota, summary, before = apply_quota(queue, gpu_model, values, confirm=confirm)
        record_event(
            actor,
            "quota.set",
            quota,
            tenant=queue.tenant,
            reason=reason,
            before=before,
            after={**snapshot(quota), "impact": summary},
        )
        _enqueue_admission_pass()
    return quota, summary


#
# Tiers
#


def update_tier(actor, tier: PriorityTier, *, reason: str = "", **changes) -> PriorityTier:
    """Change a tier's value, preemptibility or borrowing (platform admins)."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins edit priority tiers."))
    allowed = {"value", "preemptible", "may_borrow", "description"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput(_("These fields cannot be changed."), {k: _("Cannot be changed.") for k in unknown})
    before = snapshot(tier)
    for key, value in changes.items():
        setattr(tier, key, value)
    if not tier.preemptible and tier.may_borrow:
        raise InvalidInput(
            _("A non-preemptible tier cannot borrow: borrowed GPUs must be reclaimable."),
            {"may_borrow": _("Must be off for a non-preemptible tier.")},
        )
    _clean(tier, _("Invalid tier."))
    with transaction.atomic():
        tier.save()
        record_event(actor, "tier.update", tier, reason=reason, before=before, after=snapshot(tier))
    refcache.forget("tiers")
    return tier
