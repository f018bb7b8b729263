"""Submission: submit a workload (idempotent), cancel one.

Submission renders the workload for its cluster first (what the cluster cannot run is refused now, naming the
field), then admits through tenancy admission and writes the workload, its quota claim and an outbox row in
one transaction. The backend is called later, outside any transaction, by the outbox task.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from fractions import Fraction

from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.models import Tenant
from apps.accounts.permissions import has_perm, require
from apps.accounts.roles import Action
from apps.audit.services import audit_row, record_event, snapshot
from apps.backends.base import BackendError
from apps.backends.registry import backend_class
from apps.backends.render.errors import RenderError
from apps.backends.render.spec import Spec
from apps.backends.shares import SHARE_UNITS
from apps.core.errors import Conflict, InvalidInput, NotFound
from apps.core.inserts import insert_row, insert_rows, insert_rows_and_commit, insert_rows_if_locked
from apps.core.joined import fetch_joined
from apps.fleet.models import Cluster, GpuModel
from apps.tenancy.models import AdmissionState, PriorityTier, Queue
from apps.tenancy.services.admissions import ADMISSION_LOCK_SQL, decide_claim, release_admission
from apps.tenancy.services.holds import check_hold
from apps.tenancy.snapshot import tier_rows
from apps.tenancy.within_guarantee import CLAIM_COLUMNS, within_guarantee
from apps.workloads import reasons
from apps.workloads.models import OutboxAction, Workload, WorkloadKind, WorkloadState, WorkloadTemplate
from apps.workloads.rendering import render_context
from apps.workloads.services.outbox import enqueue, outbox_row, wake_after_commit_if_raised, wake_in_statement
from apps.workloads.services.state import CLAIM_PREFIX, add_event, event_row
from apps.workloads.submission_context import SubmissionContext, catalog, gpu_models, load_context

# What a replayed submission's response shows (the serializer's short form), read with it in one query.
REPLAY_RELATED = ("tenant", "queue", "tier", "cluster", "gpu_model", "created_by", "admission")


def parse(kind: str, data: dict, gpus_per_node: int = 8, known: dict[str, dict] | None = None):
    """The typed spec of `data`, or InvalidInput with the parser's messages in the reader's language."""
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
    prepared = prepare_submission(actor, kind, spec, context)
    tenant, queue, model, tier = prepared.tenant, prepared.queue, prepared.model, prepared.tier
    request = dict(
        viable=prepared.viable,
        probes=prepared.probes,
        digest=digest,
        idempotency_key=idempotency_key,
        template=template,
        tenant=tenant,
        queue=queue,
        model=model,
        tier=tier,
        ids=(context.claim_id, context.next_id),
    )
    try:
        admitted = _admit_within_guarantee(actor, **request)
        if admitted is not None:
            return admitted, True
        return _decide_and_store(actor, **request)
    except IntegrityError:
        # A retry under the same key committed first (we waited for it on the admission lock): the key's
        # unique constraint refused our row, the transaction rolled back (claim included). Answer with its workload.
        existing_id = _existing_workload_id(actor, idempotency_key) if idempotency_key else None
        if existing_id is None:
            raise
        return _replay(existing_id, digest)


@dataclass
class PreparedSubmission:
    """A submission checked up to its admission decision: who may, the parsed spec, and where it could run.

    `viable` are the candidate clusters that can run it, each with the spec parsed for its node size, in name
    order; what placement then picks among them is admission's (apps/tenancy/placement.py)."""

    kind: str
    tenant: Tenant
    queue: Queue
    tier: PriorityTier
    model: GpuModel
    parsed: Spec
    viable: list[tuple[Cluster, Spec]]
    context: SubmissionContext
    # cluster id -> the workload as it would be stored there, as rendered by the checks (`_new_workload` completes it)
    probes: dict[int, Workload]

    @property
    def gpus(self) -> Fraction:
        """The exact share it claims (a 1/7 MIG slice is 1/7 of a GPU): what quota and chargeback count."""
        return Fraction(self.parsed.total_units, SHARE_UNITS)

    @property
    def claim_name(self) -> str:
        return f"{CLAIM_PREFIX}{self.tenant.slug}/{self.parsed.name}"

    def parsed_for(self, cluster: Cluster) -> Spec:
        return next((p for c, p in self.viable if c.pk == cluster.pk), self.parsed)


def prepare_submission(actor, kind: str, spec: dict, context: SubmissionContext) -> PreparedSubmission:
    """Everything a submission checks before its admission decision, in the order it checks them (the tenant, the
    right to submit there, the spec, the queue, the tier, an admission hold, the clusters, each cluster's
    rendering): a submission and the submit page's previews both start here, so a preview refuses what a
    submission would, with the same error. Changes nothing."""
    tenant = context.tenant
    if not isinstance(spec.get("tenant"), str) or not spec["tenant"]:
        # No tenant named: the spec's own errors ("tenant: this field is required", and any others), not a 404.
        parse(kind, spec, known=catalog(list(gpu_models().values())))
    if tenant is None or not has_perm(actor, Action.VIEW, tenant):
        raise NotFound(_("No tenant %(tenant)s.") % {"tenant": repr(spec.get("tenant"))}, {"tenant": _("Not found.")})
    require(actor, Action.SUBMIT, tenant, _("You may not submit work to tenant %(slug)s.") % {"slug": tenant.slug})
    models = gpu_models()
    known = catalog(list(models.values()))
    parsed = parse(kind, spec, known=known)
    queue = context.queue
    if queue is None:
        raise InvalidInput(
            _("Tenant %(slug)s has no queue %(queue)s.") % {"slug": tenant.slug, "queue": repr(parsed.queue)},
            {"queue": _("No such queue.")},
        )
    tier = next((t for t in tier_rows() if t.name == parsed.tier), None)
    if tier is None:
        raise InvalidInput(_("Unknown tier %(tier)s.") % {"tier": repr(parsed.tier)}, {"tier": _("No such tier.")})
    check_hold(tenant, tier, context.hold_id)  # preemptible work of a held tenant (over its spend budget) is refused
    model = models[parsed.gpu_model]
    if not context.bound:
        raise InvalidInput(
            _("Queue %(queue)s is not bound to any cluster yet; ask a platform admin.") % {"queue": queue},
            {"queue": _("Not bound to a cluster.")},
        )
    candidates = _candidates(context, parsed, queue, model)
    viable, probes, refusal = [], {}, None
    by_size = {8: parsed}
    for cluster, gpus_per_node in candidates:
        if gpus_per_node not in by_size:  # gang checks against this cluster's node size
            by_size[gpus_per_node] = parse(kind, spec, gpus_per_node, known)
        try:
            probe = _probe(kind, by_size[gpus_per_node], cluster, tenant, queue, tier, model, context.next_id)
            refuse_what_the_cluster_cannot_run(probe, by_size[gpus_per_node], context.render_tables.get(cluster.pk))
        except InvalidInput as exc:
            refusal = refusal or exc
            continue
        viable.append((cluster, by_size[gpus_per_node]))
        probes[cluster.pk] = probe
    if not viable:
        raise refusal
    return PreparedSubmission(kind, tenant, queue, tier, model, parsed, viable, context, probes)


def _candidates(context, parsed, queue, model) -> list:
    """The clusters the workload may go to: the one its spec names (which must be one of its queue's), or every
    cluster bound to the queue with nodes of its GPU model."""
    named = parsed.cluster
    if named and named not in context.bound_names:
        raise InvalidInput(
            _("Queue %(queue)s is not bound to cluster %(cluster)s; its clusters: %(clusters)s.")
            % {"queue": queue, "cluster": named, "clusters": ", ".join(sorted(context.bound_names))},
            {"cluster": _("Not one of the queue's clusters.")},
        )
    candidates = context.candidates(named)
    if not candidates:
        where = named or queue
        raise InvalidInput(
            _("No cluster bound to %(queue)s has %(name)s nodes.") % {"queue": where, "name": model.name}
            if not named
            else _("Cluster %(cluster)s has no %(name)s nodes.") % {"cluster": where, "name": model.name},
            {"cluster" if named else "gpu_model": _("Not on the queue's clusters.")},
        )
    return candidates


def _probe(kind, parsed, cluster, tenant, queue, tier, model, pk) -> Workload:
    """A workload as it would be stored on `cluster`, to render it there before anything is stored."""
    return Workload(
        kind=kind,
        name=parsed.name,
        tenant=tenant,
        queue=queue,
        tier=tier,
        cluster=cluster,
        gpu_model=model,
        spec=parsed.to_dict(),
        pk=pk,
    )


def probe_workload(prepared: PreparedSubmission, cluster: Cluster) -> Workload:
    """The workload `prepared` would be on `cluster`, unsaved, with the backend name its run would get: what a
    preview renders (no id yet: the name a submission's own pre-flight check renders with)."""
    probe = _probe(
        prepared.kind,
        prepared.parsed_for(cluster),
        cluster,
        prepared.tenant,
        prepared.queue,
        prepared.tier,
        prepared.model,
        prepared.context.next_id,
    )
    probe.backend_name = probe.run_name() if probe.pk else f"wl0-{probe.name}"[:63].rstrip("-")
    return probe


def _new_workload(actor, probe: Workload, *, parsed, digest, idempotency_key, template) -> Workload:
    """The workload to store: the probe the checks rendered for its cluster (`_probe`: kind, name, tenant, queue,
    tier, cluster, model, spec and id), with what only the stored row has."""
    probe.gpus = parsed.total_gpus
    probe.template = template
    probe.idempotency_key = idempotency_key or None
    probe.request_hash = digest
    probe.created_by = actor if actor.pk else None
    return probe


def _admit_within_guarantee(
    actor, *, viable, probes, digest, idempotency_key, template, tenant, queue, model, tier, ids
) -> Workload | None:
    """A submission within its queue's guarantee on its one cluster, decided by PostgreSQL in the statement that
    writes its five rows (apps/tenancy/within_guarantee.py), sent with the admission lock and the COMMIT in one round
    trip: the lock is held only for PostgreSQL's own work. Every row is built before: the claim, the workload, its
    outbox row, its event and its audit event (`one_statement`: written by that same statement or not at all).
    None when the guard refused (nothing written) or cannot decide it: `_decide_and_store` decides, as before."""
    claim_id, workload_id = ids
    if workload_id is None or claim_id is None or len(viable) != 1:
        return None  # SQLite; or several clusters, which placement compares
    cluster, parsed = viable[0]
    user = actor.get_username()
    attempt = within_guarantee(
        name=f"{CLAIM_PREFIX}{tenant.slug}/{parsed.name}",
        queue=queue,
        gpu_model=model,
        gpus=Fraction(parsed.total_units, SHARE_UNITS),  # PreparedSubmission.gpus
        tier=tier,
        user=user,
        cluster=cluster,
        max_runtime_s=parsed.max_runtime_s,
    )
    if attempt is None:
        return None
    claim = attempt.claim
    claim.pk = claim_id
    workload = _new_workload(
        actor, probes[cluster.pk], parsed=parsed, digest=digest, idempotency_key=idempotency_key, template=template
    )
    workload.admission = claim
    workload.state = WorkloadState.ADMITTED  # its state_reason is the claim's reason, worked out by the guard
    workload.backend_name = workload.run_name()
    # The timeline's line around the reason: "submitted by u; admission: admit: " + reason.
    head, _marker, tail = reasons.SUBMITTED.partition("%(reason)s")
    words = {"user": user, "decision": claim.decision}
    guard = attempt.guard.with_column("message", "left(%s || reason || %s, 1000)", (head % words, tail % words))
    rows = (
        claim,
        workload,
        outbox_row(workload, OutboxAction.SUBMIT, wake=False),
        event_row(workload, "submitted", ""),
        audit_row(
            actor,
            "workload.submit",
            workload,
            tenant=tenant,
            after={
                **snapshot(workload, ["id", "kind", "name", "queue", "cluster", "gpus", "state"]),
                "idempotency_key": idempotency_key,
            },
            one_statement=True,
        ),
    )
    computed = {(0, attname): column for attname, column in CLAIM_COLUMNS.items()}
    computed.update({(1, "state_reason"): "reason", (3, "message"): "message"})
    taken = insert_rows_if_locked(ADMISSION_LOCK_SQL, guard, *rows, computed=computed, also=wake_in_statement())
    if taken is None:
        return None
    wake_after_commit_if_raised(taken["woke"])  # now, or when the caller's transaction commits
    return workload


def _decide_and_store(
    actor, *, viable, probes, digest, idempotency_key, template, tenant, queue, model, tier, ids
) -> tuple[Workload, bool]:
    claim_id, workload_id = ids  # PostgreSQL handed both out with the context; SQLite: None, None
    cluster, parsed = viable[0]
    # Built before the transaction: the admission lock is held from the decision to the commit, and
    # what does not depend on the decision need not be built while every other submission waits.
    new = {"parsed": parsed, "digest": digest, "idempotency_key": idempotency_key, "template": template}
    workload = _new_workload(actor, probes[cluster.pk], **new)
    # One transaction: the quota decision takes the admission lock, and the claim, the workload, its
    # outbox row, its event and its audit event commit with it, or nothing does. Where it is the outermost one
    # (PostgreSQL, ids handed out up front), the INSERT and the COMMIT go in one round trip: the admission lock,
    # which every other submission waits for, is held one round trip less.
    commit_with_insert = workload_id is not None and not connection.in_atomic_block
    with transaction.atomic():
        claim = decide_claim(
            name=f"{CLAIM_PREFIX}{tenant.slug}/{parsed.name}",
            queue=queue,
            gpu_model=model,
            # The exact share (a 1/7 MIG slice is 1/7 of a GPU of quota): what chargeback meters too.
            gpus=Fraction(parsed.total_units, SHARE_UNITS),  # PreparedSubmission.gpus
            tier=tier,
            user=actor.get_username(),
            clusters=[c for c, _parsed in viable],
            max_runtime_s=parsed.max_runtime_s,
        )
        if claim.cluster is not None and claim.cluster.pk != cluster.pk:  # placement chose another cluster
            cluster, parsed = next((c, p) for c, p in viable if c.pk == claim.cluster.pk)
            workload = _new_workload(actor, probes[cluster.pk], **{**new, "parsed": parsed})
        claim.pk = claim_id
        if claim.pk is None:
            insert_row(claim)
        workload.admission = claim
        _state_from_claim(workload, claim)
        rows = [claim, workload]
        if workload.pk is not None:  # the name goes in with the row, and all rows in one statement
            workload.backend_name = workload.run_name()
        else:
            insert_row(workload)
            workload.backend_name = workload.run_name()  # derived from the id the INSERT returned
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE workloads_workload SET backend_name = %s WHERE id = %s",
                    [workload.backend_name, workload.pk],
                )
            rows = []
        if claim.state == AdmissionState.ADMITTED:
            rows.append(outbox_row(workload, OutboxAction.SUBMIT))
        rows.append(
            event_row(
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
        if commit_with_insert:
            insert_rows_and_commit(*rows)
        else:
            insert_rows(*rows)
    return workload, True


def refuse_what_the_cluster_cannot_run(workload: Workload, parsed, tables=None) -> None:
    """Render `workload` for its cluster as the outbox will: what the cluster cannot express (a shared GPU whose
    pool it lacks, an image where Slurm has no container runtime, a secret with nowhere to read it from) is
    refused before anything is stored, naming the field, instead of failing once submitted. The cluster's own
    settings being unreadable is not the submitter's fault: the outbox reports that. `tables`: what rendering reads
    from the tables (`rendering.RenderTables`), when the submission's context has read it."""
    workload.backend_name = workload.run_name() if workload.pk else f"wl0-{workload.name}"[:63].rstrip("-")
    try:
        # The backend's class itself: rendering calls no cluster, so it is not one of the timed calls `get_backend`
        # wraps (thirteen wrappers built per call).
        backend_class(workload.cluster.kind)(workload.cluster).render(parsed, render_context(workload, tables))
    except RenderError as exc:
        raise InvalidInput(
            _("Cluster %(cluster)s cannot run this workload: %(field)s: %(reason)s")
            % {"cluster": workload.cluster.name, "field": exc.field, "reason": exc.reason},
            {exc.field: exc.reason},
        ) from exc
    except BackendError:
        pass


def _existing_workload_id(actor, idempotency_key: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM workloads_workload WHERE created_by_id = %s AND idempotency_key = %s",
            [actor.pk, idempotency_key],
        )
        row = cursor.fetchone()
    return row[0] if row else None


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


def cancel_workload(actor, workload: Workload, *, reason: str = "") -> Workload:
    """Cancel in any state: a pending one at once, a placed one through the backend; a finished one is left.
    `actor` None is the system (the health automation's hung-job rule), which must say why."""
    if actor is None:
        if not reason:
            raise ValueError("the system cancels only with a reason")
    else:
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
            enqueue(locked, OutboxAction.CANCEL)
        locked.state_reason = reason or reasons.CANCELLED_BY % {"user": actor.get_username()}
        locked.save(update_fields=["state", "state_reason", "finished_at", "updated_at"])
        add_event(locked, "cancel", locked.state_reason)
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
