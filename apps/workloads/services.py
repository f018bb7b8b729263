"""Workload services: submit (idempotent), cancel, templates; the outbox that talks to backends; reconcile.

Submission admits through tenancy admission and writes the workload, its quota claim and an outbox
row in one transaction. The backend is called later, outside any transaction, by the outbox task.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
from collections import defaultdict
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.permissions import has_perm, require
from apps.accounts.roles import Action
from apps.audit.services import audit_row, record_event, snapshot
from apps.backends.base import BackendError, NotFoundError
from apps.backends.registry import get_backend
from apps.backends.types import WorkloadState as BackendState
from apps.core.errors import Conflict, InvalidInput, NotFound
from apps.core.inserts import insert_row, insert_rows
from apps.core.joined import fetch_joined
from apps.core.wakeup import wake
from apps.fleet.models import GpuModel
from apps.tenancy.models import AdmissionState, Tenant
from apps.tenancy.services.admissions import decide_claim, release_admission, submit_admission
from apps.tenancy.snapshot import tier_rows
from apps.workloads import reasons
from apps.workloads.models import (
    OutboxAction,
    OutboxEntry,
    OutboxStatus,
    Workload,
    WorkloadEvent,
    WorkloadKind,
    WorkloadState,
    WorkloadTemplate,
)
from apps.workloads.submission_context import gpu_models, load_context

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 300
# Claims made for workloads carry this prefix, so the sweep can tell one whose workload never got written.
CLAIM_PREFIX = "workload:"
CLUSTER_EVENT = "cluster"  # a workload event the backend reported (scheduler, kubelet, controller)
ORPHAN_AFTER = timedelta(minutes=5)


def catalog(models: list[GpuModel] | None = None) -> dict[str, dict]:
    """The GPU model catalog in the shape the spec parser takes (from `models` when already loaded)."""
    return {
        m.code: {
            "name": m.name,
            "memory_mib": m.memory_mib,
            "mig_profiles": m.mig_profiles,
            "product_labels": m.product_labels,
            "nvlink": m.nvlink,
        }
        for m in (models if models is not None else GpuModel.objects.all())
    }


def _parse(kind: str, data: dict, gpus_per_node: int = 8, known: dict[str, dict] | None = None):
    from apps.workloads.specs import SpecError, parse_spec

    if kind not in WorkloadKind.values:
        raise InvalidInput(
            _("Unknown workload kind %(kind)s.") % {"kind": repr(kind)},
            {"kind": _("One of: %(values)s.") % {"values": ", ".join(WorkloadKind.values)}},
        )
    try:
        return parse_spec(kind, data, known if known is not None else catalog(), gpus_per_node=gpus_per_node)
    except SpecError as exc:
        message, fields = exc.translated()
        raise InvalidInput(message, fields) from exc


def _request_hash(kind: str, data: dict) -> str:
    return hashlib.sha256(json.dumps({"kind": kind, "spec": data}, sort_keys=True, default=str).encode()).hexdigest()


def _event(workload: Workload, kind: str, message: str) -> None:
    insert_row(_event_row(workload, kind, message))


def _event_row(workload: Workload, kind: str, message: str) -> WorkloadEvent:
    return WorkloadEvent(workload=workload, kind=kind, message=message[:1000])


def _backend_name(workload: Workload, attempt: int = 0) -> str:
    """The backend's name for the workload's `attempt`-th run (0: the first). A requeued workload gets a new
    name so that the backend's idempotent submit starts a new run instead of returning the finished one."""
    prefix = f"wl{workload.pk}r{attempt}" if attempt else f"wl{workload.pk}"
    return f"{prefix}-{workload.name}"[:63].rstrip("-")


def submit_workload(
    actor, *, kind: str, spec: dict, idempotency_key: str | None = None, template: WorkloadTemplate | None = None
) -> tuple[Workload, bool]:
    """Submit a training job or inference service. Returns (workload, created).

    With an idempotency key the same key returns the same workload (a different body under a used
    key is a 409), so a CI retry never makes a second one.
    """
    if idempotency_key is not None and (not idempotency_key or len(idempotency_key) > 200):
        raise InvalidInput(_("The Idempotency-Key must be 1 to 200 characters."), {"idempotency_key": _("1 to 200.")})
    digest = _request_hash(kind, spec)
    if not isinstance(spec, dict):
        raise NotFound(_("No tenant None."), {"tenant": _("Not found.")})
    context = load_context(actor.pk, idempotency_key or None, spec)  # one query: key, tenant, queue, clusters
    if context.existing_id is not None:
        return _replay(context.existing_id, digest)
    tenant = context.tenant
    if tenant is None or not has_perm(actor, Action.VIEW, tenant):
        raise NotFound(_("No tenant %(tenant)s.") % {"tenant": repr(spec.get("tenant"))}, {"tenant": _("Not found.")})
    require(actor, Action.SUBMIT, tenant, _("You may not submit work to tenant %(slug)s.") % {"slug": tenant.slug})
    models = gpu_models()
    known = catalog(list(models.values()))
    parsed = _parse(kind, spec, known=known)
    queue = context.queue
    if queue is None:
        raise InvalidInput(
            _("Tenant %(slug)s has no queue %(queue)s.") % {"slug": tenant.slug, "queue": repr(parsed.queue)},
            {"queue": _("No such queue.")},
        )
    tier = next((t for t in tier_rows() if t.name == parsed.tier), None)
    if tier is None:
        raise InvalidInput(_("Unknown tier %(tier)s.") % {"tier": repr(parsed.tier)}, {"tier": _("No such tier.")})
    if tier.preemptible:
        from apps.chargeback.budgets import check_admission  # chargeback reads workloads: import late

        check_admission(tenant, tier, context.over_budget_id)  # over its spend budget: maybe refused
    model = models[parsed.gpu_model]
    if not context.bound:
        raise InvalidInput(
            _("Queue %(queue)s is not bound to any cluster yet; ask a platform admin.") % {"queue": queue},
            {"queue": _("Not bound to a cluster.")},
        )
    picked = context.pick_cluster()
    if picked is None:
        raise InvalidInput(
            _("No cluster bound to %(queue)s has %(name)s nodes.") % {"queue": queue, "name": model.name},
            {"gpu_model": _("Not on the queue's clusters.")},
        )
    cluster, gpus_per_node = picked
    if gpus_per_node != 8:
        parsed = _parse(kind, spec, gpus_per_node, known)  # gang checks against this cluster's node size
    try:
        return _decide_and_store(
            actor,
            kind=kind,
            parsed=parsed,
            digest=digest,
            idempotency_key=idempotency_key,
            template=template,
            tenant=tenant,
            queue=queue,
            cluster=cluster,
            model=model,
            tier=tier,
            ids=(context.claim_id, context.next_id),
        )
    except IntegrityError:
        # A retry under the same key committed first (we waited for it on the admission lock): the key's
        # unique constraint refused our row, the transaction rolled back (claim included). Answer with its workload.
        existing_id = _existing_workload_id(actor, idempotency_key) if idempotency_key else None
        if existing_id is None:
            raise
        return _replay(existing_id, digest)


def _decide_and_store(
    actor, *, kind, parsed, digest, idempotency_key, template, tenant, queue, cluster, model, tier, ids
) -> tuple[Workload, bool]:
    claim_id, workload_id = ids  # PostgreSQL handed both out with the context; SQLite: None, None
    # Built before the transaction: the admission lock is held from the decision to the commit, and
    # what does not depend on the decision need not be built while every other submission waits.
    workload = Workload(
        kind=kind,
        name=parsed.name,
        tenant=tenant,
        queue=queue,
        tier=tier,
        cluster=cluster,
        gpu_model=model,
        gpus=parsed.total_gpus,
        spec=parsed.to_dict(),
        template=template,
        idempotency_key=idempotency_key or None,
        request_hash=digest,
        created_by=actor if actor.pk else None,
        pk=workload_id,
    )
    # One transaction: the quota decision takes the admission lock, and the claim, the workload, its
    # outbox row, its event and its audit event commit with it, or nothing does.
    with transaction.atomic():
        claim = decide_claim(
            name=f"{CLAIM_PREFIX}{tenant.slug}/{parsed.name}",
            queue=queue,
            gpu_model=model,
            gpus=max(math.ceil(parsed.total_gpus), 1),  # quota counts everything it holds, as Kueue does
            tier=tier,
            user=actor.get_username(),
        )
        claim.pk = claim_id
        if claim.pk is None:
            insert_row(claim)
        workload.admission = claim
        _state_from_claim(workload, claim)
        rows = [claim, workload]
        if workload.pk is not None:  # the name goes in with the row, and all rows in one statement
            workload.backend_name = _backend_name(workload)
        else:
            insert_row(workload)
            workload.backend_name = _backend_name(workload)  # derived from the id the INSERT returned
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE workloads_workload SET backend_name = %s WHERE id = %s",
                    [workload.backend_name, workload.pk],
                )
            rows = []
        if claim.state == AdmissionState.ADMITTED:
            rows.append(_outbox_row(workload, OutboxAction.SUBMIT))
        rows.append(
            _event_row(
                workload,
                "submitted",
                reasons.SUBMITTED % {"user": actor.get_username(), "decision": claim.decision, "reason": claim.reason},
            )
        )
        rows.append(
            audit_row(
                actor,
                "workload.submit",
                workload,
                tenant=tenant,
                after={
                    **snapshot(workload, ["id", "kind", "name", "queue", "cluster", "gpus", "state"]),
                    "idempotency_key": idempotency_key,
                },
            )
        )
        insert_rows(*rows)
    return workload, True


def _existing_workload_id(actor, idempotency_key: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM workloads_workload WHERE created_by_id = %s AND idempotency_key = %s",
            [actor.pk, idempotency_key],
        )
        row = cursor.fetchone()
    return row[0] if row else None


REPLAY_RELATED = ("tenant", "queue", "tier", "cluster", "gpu_model", "created_by", "admission")


def _replay(workload_id: int, digest: str) -> tuple[Workload, bool]:
    # With what the response shows (the serializer's short form) in the same query.
    existing = fetch_joined(Workload, REPLAY_RELATED, "id", workload_id)
    if existing.request_hash != digest:
        raise Conflict(
            _("This Idempotency-Key was used for a different request."),
            {"idempotency_key": _("Already used with another body.")},
            code="idempotency_conflict",
        )
    return existing, False


def _state_from_claim(workload: Workload, claim) -> None:
    """Map the claim's state onto the (new) workload; the caller queues an admitted one's backend submission."""
    if claim.state == AdmissionState.ADMITTED:
        workload.state, workload.state_reason = WorkloadState.ADMITTED, claim.reason
    elif claim.state == AdmissionState.REJECTED:
        workload.state, workload.state_reason = WorkloadState.REJECTED, claim.reason
        workload.finished_at = timezone.now()
    else:
        workload.state, workload.state_reason = WorkloadState.PENDING, claim.reason


def _enqueue(workload: Workload, action: str) -> OutboxEntry:
    return insert_row(_outbox_row(workload, action))


def _outbox_row(workload: Workload, action: str) -> OutboxEntry:
    """An outbox row (unsaved) for the caller's transaction; its commit wakes the drain."""
    transaction.on_commit(wake_outbox)
    return OutboxEntry(workload=workload, action=action, next_attempt_at=timezone.now())


OUTBOX_WAKE = "workloads-outbox"


def wake_outbox() -> None:
    """After a commit that left outbox rows: queue one drain unless one is already queued (apps/core/wakeup.py)."""
    from apps.workloads.tasks import drain_outbox_task

    wake(drain_outbox_task, OUTBOX_WAKE)


def cancel_workload(actor, workload: Workload, *, reason: str = "") -> Workload:
    """Cancel in any state: a pending one at once, a placed one through the backend; a finished one is left."""
    require(
        actor,
        Action.SUBMIT,
        workload.tenant,
        _("You may not cancel work in tenant %(slug)s.") % {"slug": workload.tenant.slug},
    )
    if workload.is_finished or workload.state == WorkloadState.CANCELLING:
        return workload
    with transaction.atomic():
        locked = Workload.objects.select_for_update().get(pk=workload.pk)
        before = locked.state
        if locked.state == WorkloadState.PENDING:
            locked.state, locked.finished_at = WorkloadState.CANCELLED, timezone.now()
            if locked.admission_id:
                release_admission(locked.admission)
        else:
            locked.state = WorkloadState.CANCELLING
            _enqueue(locked, OutboxAction.CANCEL)
        locked.state_reason = reason or reasons.CANCELLED_BY % {"user": actor.get_username()}
        locked.save(update_fields=["state", "state_reason", "finished_at", "updated_at"])
        _event(locked, "cancel", locked.state_reason)
        record_event(
            actor,
            "workload.cancel",
            locked,
            tenant=locked.tenant,
            reason=reason,
            before={"state": before},
            after={"state": locked.state},
        )
    return locked


#
# Templates
#


def save_template(
    actor, *, tenant: Tenant, name: str, kind: str, spec: dict, description: str = ""
) -> WorkloadTemplate:
    """Save a template; an existing name gets a new version (old versions stay for what used them)."""
    require(actor, Action.SUBMIT, tenant, _("You may not save templates for tenant %(slug)s.") % {"slug": tenant.slug})
    if not name or len(name) > 100:
        raise InvalidInput(_("Name the template (1 to 100 characters)."), {"name": _("1 to 100 characters.")})
    _parse(kind, {**spec, "tenant": tenant.slug})
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
    from apps.workloads.specs import apply_overrides

    spec = apply_overrides({**template.spec, "tenant": template.tenant.slug}, overrides or {})
    return submit_workload(actor, kind=template.kind, spec=spec, idempotency_key=idempotency_key, template=template)


#
# The outbox: the only place that calls backends for workloads
#


def _claim_entry(entry_id: int) -> bool:
    now = timezone.now()
    lease = now - timedelta(seconds=OutboxEntry.LEASE_SECONDS)
    due = Q(status=OutboxStatus.PENDING, next_attempt_at__lte=now) | Q(
        status=OutboxStatus.PROCESSING, claimed_at__lt=lease
    )
    return OutboxEntry.objects.filter(due, pk=entry_id).update(status=OutboxStatus.PROCESSING, claimed_at=now) == 1


def process_outbox_entry(entry_id: int) -> str:
    """Carry out one outbox entry against the backend. Returns what happened (for logs and tests)."""
    if not _claim_entry(entry_id):
        return "skipped"
    entry = OutboxEntry.objects.select_related("workload__cluster", "workload__tier", "workload__tenant").get(
        pk=entry_id
    )
    workload = entry.workload
    backend = get_backend(workload.cluster)
    try:
        if entry.action == OutboxAction.SUBMIT:
            if workload.state in WorkloadState.terminal() or workload.state == WorkloadState.CANCELLING:
                return _finish_entry(entry, "superseded")
            from apps.workloads.specs import parse_spec, to_backend_spec

            parsed = parse_spec(workload.kind, workload.spec, catalog())
            backend_spec = to_backend_spec(parsed, workload.tier.value)
            backend_spec.name = workload.backend_name
            if workload.cluster.kind == "slurm":
                from apps.workloads.rendering import slurm_script

                backend_spec.manifest = slurm_script(workload, parsed)
            elif workload.cluster.kind == "kubernetes":
                backend_spec.manifest = _kubernetes_manifest(workload, parsed)
            result = backend.submit(backend_spec)
            with transaction.atomic():
                where = {"cluster": workload.cluster.name, "backend_id": result.backend_id}
                where.update(backend_state=result.state.value, reason=result.reason)
                line = reasons.SUBMITTED_TO_WHY if (result.reason or "").strip() else reasons.SUBMITTED_TO
                _event(workload, "backend", (line % where).strip())
                _set_state(workload, _map_state(result.state, workload.state), result.reason)
                _finish_entry(entry, "done")
            return "submitted"
        # cancel / preempt
        with contextlib.suppress(NotFoundError):  # never reached the backend, or already gone: nothing to stop
            backend.cancel(workload.backend_name)
        with transaction.atomic():
            final = WorkloadState.PREEMPTED if entry.action == OutboxAction.PREEMPT else WorkloadState.CANCELLED
            _set_state(workload, final, workload.state_reason)
            _finish_entry(entry, "done")
            if entry.action == OutboxAction.PREEMPT:
                _maybe_requeue(workload)
        return entry.action
    except BackendError as exc:
        return _backend_failed(entry, workload, exc)


def _kubernetes_manifest(workload: Workload, spec):
    """The objects the Kubernetes backend applies: rendered with the queue's namespace and the pool's taints."""
    from apps.backends.base import PermanentBackendError
    from apps.workloads.rendering import kubernetes_rendering

    try:
        return kubernetes_rendering(workload, spec)
    except (ValueError, TypeError) as exc:
        where = f"{workload.backend_name} for {workload.cluster.name}"
        raise PermanentBackendError(f"cannot render {where}: {exc}") from exc


def _finish_entry(entry: OutboxEntry, outcome: str) -> str:
    OutboxEntry.objects.filter(pk=entry.pk).update(status=OutboxStatus.DONE, done_at=timezone.now())
    return outcome


def _backend_failed(entry: OutboxEntry, workload: Workload, exc: BackendError) -> str:
    if exc.retryable:
        delay = min(2**entry.attempts * 2, MAX_BACKOFF_S)
        OutboxEntry.objects.filter(pk=entry.pk).update(
            status=OutboxStatus.PENDING,
            attempts=entry.attempts + 1,
            last_error=str(exc)[:2000],
            next_attempt_at=timezone.now() + timedelta(seconds=delay),
            claimed_at=None,
        )
        retry = {"error": exc, "attempt": entry.attempts + 1, "delay": delay}
        _event(workload, "backend-retry", reasons.BACKEND_RETRY % retry)
        return "retry"
    with transaction.atomic():
        OutboxEntry.objects.filter(pk=entry.pk).update(
            status=OutboxStatus.FAILED, last_error=str(exc)[:2000], done_at=timezone.now()
        )
        if entry.action == OutboxAction.SUBMIT:
            _set_state(workload, WorkloadState.FAILED, reasons.BACKEND_REFUSED % {"error": exc})
    return "failed"


def _map_state(state: BackendState, current: str) -> str:
    return {
        BackendState.PENDING: WorkloadState.ADMITTED,
        BackendState.RUNNING: WorkloadState.RUNNING,
        BackendState.SUCCEEDED: WorkloadState.SUCCEEDED,
        BackendState.FAILED: WorkloadState.FAILED,
        BackendState.CANCELLED: WorkloadState.CANCELLED,
        BackendState.PREEMPTED: WorkloadState.PREEMPTED,
    }.get(state, current)


def _set_state(workload: Workload, state: str, reason: str = "", placements=None) -> None:
    """Move a workload to `state` (compare-and-set on the old state); a terminal one releases its quota."""
    now = timezone.now()
    fields = {"state": state, "state_reason": (reason or "")[:500], "updated_at": now}
    if state == WorkloadState.RUNNING and not workload.started_at:
        fields["started_at"] = now
    if state in WorkloadState.terminal():
        fields["finished_at"] = now
    if placements is not None:
        fields["placements"] = placements
    if Workload.objects.filter(pk=workload.pk, state=workload.state).update(**fields) != 1:
        return
    if workload.state != state:
        change = {"from_state": workload.state, "to_state": state, "reason": reason}
        _event(workload, "state", (reasons.STATE_CHANGED_WHY if reason else reasons.STATE_CHANGED) % change)
    for key, value in fields.items():
        setattr(workload, key, value)
    if state in WorkloadState.terminal() and workload.admission_id:
        release_admission(workload.admission)


def _maybe_requeue(workload: Workload) -> None:
    """A preempted training job with retries left goes back to waiting for quota."""
    retries = int(workload.spec.get("retries", 0) or 0)
    if workload.kind != WorkloadKind.TRAINING or workload.requeues >= retries:
        return
    claim = submit_admission(
        name=f"{CLAIM_PREFIX}{workload}",
        queue=workload.queue,
        gpu_model=workload.gpu_model,
        gpus=max(math.ceil(workload.gpus), 1),
        tier=workload.tier,
        user=workload.created_by.get_username() if workload.created_by else "",
    )
    Workload.objects.filter(pk=workload.pk).update(
        admission=claim,
        requeues=workload.requeues + 1,
        backend_name=_backend_name(workload, workload.requeues + 1),
        state=WorkloadState.PENDING,
        finished_at=None,
        state_reason=(reasons.REQUEUED_AFTER_PREEMPTION % {"reason": claim.reason})[:500],
    )
    _event(workload, "requeue", reasons.REQUEUED % {"run": workload.requeues + 1, "retries": retries})


def placed_on_node(cluster_id: int, node: str, *, gpus: set[int] | None = None, ended_since=None) -> list[Workload]:
    """Workloads with a worker on `node` (and on one of `gpus`, when given): running or being placed, and
    those that ended since `ended_since` (their last placement is kept when they end)."""
    states = Q(state__in=[WorkloadState.ADMITTED, WorkloadState.RUNNING, WorkloadState.CANCELLING])
    if ended_since is not None:
        states |= Q(state__in=WorkloadState.terminal(), finished_at__gte=ended_since)
    candidates = Workload.objects.filter(states, cluster_id=cluster_id).select_related("tenant", "tier")
    if connection.vendor == "postgresql":  # jsonb containment narrows it in the index scan; SQLite filters below
        candidates = candidates.filter(placements__contains=[{"node": node}])
    out = []
    for workload in candidates:
        for placement in workload.placements or []:
            if placement.get("node") == node and (gpus is None or gpus & set(placement.get("gpus") or [])):
                out.append(workload)
                break
    return out


def requeue_after_fault(actor, workload: Workload, *, reason: str) -> Workload | None:
    """Send a training job that a hardware fault killed back to the queue, as a new run that resumes from its
    checkpoint (same spec, same CHECKPOINT_PATH). A fault is not the job's doing, so its `retries` are not
    spent. `actor` None is the health automation. Returns None when there is nothing to requeue."""
    if actor is not None:
        require(actor, Action.OPERATE, None, _("Requeueing after a fault needs on-call or platform-admin."))
    if workload.kind != WorkloadKind.TRAINING:
        return None
    with transaction.atomic():
        locked = Workload.objects.select_for_update().select_related("tenant").get(pk=workload.pk)
        if locked.state not in {WorkloadState.RUNNING, WorkloadState.ADMITTED, WorkloadState.FAILED}:
            return None
        before = locked.state
        if locked.admission_id and before != WorkloadState.FAILED:
            release_admission(locked.admission)
        claim = submit_admission(
            name=f"{CLAIM_PREFIX}{locked}",
            queue=locked.queue,
            gpu_model=locked.gpu_model,
            gpus=max(math.ceil(locked.gpus), 1),
            tier=locked.tier,
            user=locked.created_by.get_username() if locked.created_by else "",
        )
        locked.requeues += 1
        locked.admission = claim
        locked.backend_name = _backend_name(locked, locked.requeues)
        locked.state, locked.started_at, locked.finished_at = WorkloadState.PENDING, None, None
        locked.placements = []
        locked.state_reason = (reasons.REQUEUED_AFTER_FAULT % {"fault": reason, "reason": claim.reason})[:500]
        locked.save(
            update_fields=[
                "requeues",
                "admission",
                "backend_name",
                "state",
                "started_at",
                "finished_at",
                "placements",
                "state_reason",
                "updated_at",
            ]
        )
        _event(locked, "requeue", reasons.REQUEUED_FAULT_EVENT % {"run": locked.requeues + 1, "reason": reason})
        record_event(
            actor,
            "workload.requeue",
            locked,
            tenant=locked.tenant,
            reason=reason,
            before={"state": before},
            after={"state": locked.state, "requeues": locked.requeues, "backend_name": locked.backend_name},
        )
    return locked


#
# The periodic tick: admit, dispatch, reclaim, retry, reconcile
#


def dispatch_admitted() -> int:
    """Pending workloads whose claim the admission pass admitted get their backend submission queued."""
    count = 0
    for workload in Workload.objects.filter(
        state=WorkloadState.PENDING, admission__state=AdmissionState.ADMITTED
    ).select_related("admission"):
        with transaction.atomic():
            if (
                Workload.objects.filter(pk=workload.pk, state=WorkloadState.PENDING).update(
                    state=WorkloadState.ADMITTED, state_reason=workload.admission.reason[:500]
                )
                == 1
            ):
                _event(workload, "admitted", workload.admission.reason)
                _enqueue(workload, OutboxAction.SUBMIT)
                count += 1
    return count


def carry_out_reclaims() -> int:
    """Preempt the victims of reclaim plans the admission pass recorded (not online-inference: never planned)."""
    from apps.tenancy.models import Admission

    victims: set[int] = set()
    for plan in Admission.objects.filter(state=AdmissionState.PENDING, decision="reclaim").values_list(
        "reclaim_plan", flat=True
    ):
        victims.update(int(v[0]) for v in plan or [])
    count = 0
    for workload in Workload.objects.filter(
        admission_id__in=victims, state__in=[WorkloadState.ADMITTED, WorkloadState.RUNNING]
    ):
        with transaction.atomic():
            if (
                Workload.objects.filter(pk=workload.pk, state=workload.state).update(
                    state=WorkloadState.CANCELLING, state_reason=reasons.PREEMPTED_FOR_LENDER
                )
                == 1
            ):
                _event(workload, "preempt", reasons.RECLAIMED)
                _enqueue(workload, OutboxAction.PREEMPT)
                count += 1
    return count


def drain_outbox(limit: int = 500) -> int:
    """Queue a task per due entry: new ones, ones whose backoff is over, ones whose worker died holding them."""
    from apps.workloads.tasks import process_outbox_task

    now = timezone.now()
    lease = now - timedelta(seconds=OutboxEntry.LEASE_SECONDS)
    due = list(
        OutboxEntry.objects.filter(
            Q(status=OutboxStatus.PENDING, next_attempt_at__lte=now)
            | Q(status=OutboxStatus.PROCESSING, claimed_at__lt=lease)
        ).values_list("id", flat=True)[:limit]
    )
    for entry_id in due:
        process_outbox_task.delay(entry_id)
    return len(due)


def reconcile_workloads() -> int:
    """Ask each backend, in one call per cluster, for the state of what it runs, and record changes."""
    changed = 0
    by_cluster: dict[int, list[Workload]] = defaultdict(list)
    for workload in (
        Workload.objects.filter(state__in=[WorkloadState.ADMITTED, WorkloadState.RUNNING])
        .exclude(backend_name="")
        .select_related("cluster", "admission")
    ):
        by_cluster[workload.cluster_id].append(workload)
    for workloads in by_cluster.values():
        cluster = workloads[0].cluster
        submitted = set(
            OutboxEntry.objects.filter(
                workload__in=workloads, action=OutboxAction.SUBMIT, status=OutboxStatus.DONE
            ).values_list("workload_id", flat=True)
        )
        try:
            statuses = get_backend(cluster).status([w.backend_name for w in workloads if w.pk in submitted])
        except BackendError as exc:
            logger.warning("reconcile of %s failed: %s", cluster.name, exc)
            continue
        _record_cluster_events(workloads, statuses)
        for workload in workloads:
            status = statuses.get(workload.backend_name)
            if status is None:
                continue
            if status.state == BackendState.UNKNOWN:
                new_state, reason = WorkloadState.FAILED, reasons.BACKEND_FORGOT
            else:
                new_state, reason = _map_state(status.state, workload.state), status.reason
            placements = [{"node": p.node, "gpus": p.gpu_indexes} for p in status.placements]
            if not placements and new_state in WorkloadState.terminal():
                placements = workload.placements  # where it last ran: a hardware incident looks for it here
            # A new reason alone is news too: "0/4 nodes are available: ..." replaces "waiting for Kueue".
            reason_changed = bool(reason) and reason[:500] != workload.state_reason
            if new_state != workload.state or placements != workload.placements or reason_changed:
                with transaction.atomic():
                    _set_state(workload, new_state, reason, placements=placements)
                changed += 1
    return changed


def _record_cluster_events(workloads: list[Workload], statuses: dict) -> None:
    """The backend's events (e.g. Kubernetes FailedScheduling) on each workload's timeline, each line once.

    One query for the lines already recorded and one bulk insert, whatever the number of workloads.
    """
    reported = {w.pk: statuses[w.backend_name].events for w in workloads if statuses.get(w.backend_name)}
    reported = {pk: lines for pk, lines in reported.items() if lines}
    if not reported:
        return
    seen = set(
        WorkloadEvent.objects.filter(workload_id__in=reported, kind=CLUSTER_EVENT).values_list("workload_id", "message")
    )
    new = [
        WorkloadEvent(workload_id=pk, kind=CLUSTER_EVENT, message=line[:1000])
        for pk, lines in reported.items()
        for line in lines
        if (pk, line[:1000]) not in seen
    ]
    WorkloadEvent.objects.bulk_create(new)


def release_orphan_claims() -> int:
    """Claims whose submission died between the quota decision and writing the workload give their GPUs back."""
    from apps.tenancy.models import Admission

    orphans = Admission.objects.filter(
        name__startswith=CLAIM_PREFIX,
        state__in=[AdmissionState.PENDING, AdmissionState.ADMITTED],
        workload__isnull=True,
        submitted_at__lt=timezone.now() - ORPHAN_AFTER,
    )
    count = 0
    for claim in orphans:
        release_admission(claim)
        count += 1
    return count


def tick() -> dict:
    """One round of the loop that keeps workloads moving (beat runs it every few seconds)."""
    from apps.tenancy.services.admissions import run_admission_pass

    orphans = release_orphan_claims()
    admission = run_admission_pass()
    return {
        "orphans": orphans,
        "admission": admission,
        "dispatched": dispatch_admitted(),
        "reclaimed": carry_out_reclaims(),
        "outbox": drain_outbox(),
        "reconciled": reconcile_workloads(),
    }
