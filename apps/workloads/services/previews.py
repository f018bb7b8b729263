"""The submit page's previews: what submitting a spec now would do, computed by the code a submission runs, with
nothing stored, no id taken and no lock held.

    prepared = preview_submission(user, kind, spec)   # the submission's own checks (InvalidInput, Forbidden, ...)
    admission_preview(user, prepared)                 # tenancy's dry run of the admission decision (DryRun)
    rendering_preview(prepared, cluster)              # what the cluster receives, strictly validated
    preview_cluster(user, prepared)                   # the cluster it names, or the one placement would choose

The cost preview is chargeback's (above workloads): it registers itself as a submit preview
(apps/workloads/panels.py) and prices `prepared` with the rate card.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from django.utils.translation import gettext as _

from apps.backends.base import BackendError
from apps.backends.registry import backend_class, get_backend
from apps.backends.render.titles import workload_title
from apps.backends.render.workload import RenderedWorkload, validation_errors
from apps.core.errors import InvalidInput
from apps.fleet.models import Cluster
from apps.tenancy.services.admissions import DryRun, dry_run_claim
from apps.workloads.rendering import render_context
from apps.workloads.services.submission import PreparedSubmission, prepare_submission, probe_workload
from apps.workloads.submission_context import load_context


@dataclass
class RenderingPreview:
    """What `cluster` would be given: `text` (manifests as YAML, or the sbatch script) under `title`, and the
    strict validation's findings (`validated`: Kubernetes objects are checked against every supported version's
    schemas and the CRDs; a script has no schema); `error` when it cannot be rendered at all."""

    cluster: Cluster
    title: str
    text: str = ""
    validated: bool = False
    versions: tuple[str, ...] = ()
    problems: list[str] = field(default_factory=list)
    error: str = ""


def preview_submission(actor, kind: str, spec) -> PreparedSubmission:
    """`spec` checked as a submission checks it, up to its admission decision; raises what a submission would."""
    if not isinstance(spec, dict):
        raise InvalidInput(_("The spec is an object of fields."), {"spec": _("An object of fields.")})
    context = load_context(actor.pk, None, spec, reserve_ids=False)
    return prepare_submission(actor, kind, spec, context)


def admission_preview(actor, prepared: PreparedSubmission) -> DryRun:
    """What admission would decide for `prepared` if it were submitted now: the arguments `submit_workload` passes
    to `decide_claim`, given to its dry run."""
    return dry_run_claim(
        actor,
        queue=prepared.queue,
        gpu_model=prepared.model,
        gpus=prepared.gpus,
        tier=prepared.tier,
        user=actor.get_username(),
        clusters=[cluster for cluster, _parsed in prepared.viable],
        max_runtime_s=prepared.parsed.max_runtime_s,
        name=prepared.claim_name,
    )


def preview_cluster(actor, prepared: PreparedSubmission, dry: DryRun | None = None) -> Cluster:
    """The cluster the previews show: the only one that can run it, else the one placement would choose now."""
    if len(prepared.viable) == 1:
        return prepared.viable[0][0]
    dry = dry if dry is not None else admission_preview(actor, prepared)
    return dry.cluster or prepared.viable[0][0]


def rendering_preview(prepared: PreparedSubmission, cluster: Cluster) -> RenderingPreview:
    """The rendering for `cluster` as the outbox will make it (the same context and spec), strictly validated."""
    from apps.backends.render.validate import K8S_VERSIONS

    renderer = backend_class(cluster.kind).renderer
    preview = RenderingPreview(cluster=cluster, title=workload_title(renderer))
    workload = probe_workload(prepared, cluster)
    # Not submitted: no id yet (the names and the workload label carry it once it is).
    context = replace(render_context(workload), workload_id="new")
    try:
        rendered = get_backend(cluster).render(prepared.parsed_for(cluster), context)
    except (BackendError, ValueError, TypeError) as exc:  # RenderError is a ValueError; it was checked already
        preview.error = str(exc)
        return preview
    preview.text = rendered.text
    if isinstance(rendered, RenderedWorkload):
        preview.validated, preview.versions = True, K8S_VERSIONS
        preview.problems = validation_errors(rendered, K8S_VERSIONS)
    return preview
