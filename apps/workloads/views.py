"""Workload pages: the list, one workload (spec, rendering, timeline, placement), and the submit form."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from apps.accounts.permissions import has_perm
from apps.accounts.roles import Action
from apps.core.errors import Forbidden, NotFound, ServiceError
from apps.core.tables import Column
from apps.core.views import ScopedListView, is_htmx, vary_on_htmx
from apps.workloads import services
from apps.workloads.cold_starts import cold_starts
from apps.workloads.filtersets import TemplateFilterSet, WorkloadFilterSet
from apps.workloads.forms import SpecForm, SubmitChoices
from apps.workloads.logs import logs_for, streams_logs, worker_count
from apps.workloads.models import Workload, WorkloadTemplate
from apps.workloads.panels import status_panels, submit_previews
from apps.workloads.panels import submit_preview as submit_preview_named

EXAMPLES = {
    "training": {
        "name": "pretrain-demo",
        "tenant": "acme-llm",
        "queue": "train",
        "tier": "training",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["python", "train.py"],
        "args": ["--config", "configs/8b.yaml"],
        "workers": 2,
        "gpus_per_worker": 8,
        "gpu_model": "h100",
        "topology": "leaf",
        "max_runtime_s": 7200,
    },
    "inference": {
        "name": "llama-serve",
        "tenant": "acme-llm",
        "queue": "serve",
        "tier": "online-inference",
        "engine": "vllm",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
        "tensor_parallel": 1,
        "replicas": 1,
    },
}


def _queue_label(workload: Workload) -> str:
    return f"{workload.tenant.slug}/{workload.queue.name}"


class WorkloadListView(ScopedListView):
    model = Workload
    filterset_class = WorkloadFilterSet
    select_related = ("tenant", "queue", "tier", "cluster", "gpu_model", "created_by")
    template_name = "workloads/workload_list.html"
    partial_template_name = "workloads/_workload_table.html"
    columns = [
        Column("id", "#", order_by="id", csv="pk"),
        Column("name", gettext_lazy("Name"), order_by="name"),
        Column("kind", gettext_lazy("Kind"), order_by="kind"),
        Column(
            "queue",
            gettext_lazy("Tenant / queue"),
            order_by=("tenant__slug", "queue__name"),
            csv=_queue_label,
        ),
        Column("tier", gettext_lazy("Tier"), order_by="-tier__value", csv="tier.name"),
        Column("gpus", gettext_lazy("GPUs"), order_by=("gpus", "gpu_model__code"), css="text-end"),
        Column("gpu_model", gettext_lazy("GPU model"), csv="gpu_model.code", shown=False),
        Column("cluster", gettext_lazy("Cluster"), order_by="cluster__name", csv="cluster.name"),
        Column("state", gettext_lazy("State"), order_by="state"),
        Column("why", gettext_lazy("Why"), csv="state_reason"),
        Column("created", gettext_lazy("Submitted"), order_by="created_at", csv="created_at"),
    ]
    default_sort = "-created"
    csv_name = "workloads"

    def is_live(self, rows) -> bool:
        return any(not w.is_finished for w in rows)


class TemplateListView(ScopedListView):
    """Saved specs per tenant, every version; "Use" opens the submit form with the template."""

    model = WorkloadTemplate
    filterset_class = TemplateFilterSet
    select_related = ("tenant", "created_by")
    template_name = "workloads/template_list.html"
    columns = [
        Column("name", gettext_lazy("Name"), order_by=("name", "-version")),
        Column("version", gettext_lazy("Version"), order_by="version", css="text-end"),
        Column("kind", gettext_lazy("Kind"), order_by="kind"),
        Column("tenant", gettext_lazy("Tenant"), order_by="tenant__path", csv="tenant.slug"),
        Column("description", gettext_lazy("Description")),
        Column("created_by", gettext_lazy("Saved by"), order_by="created_by__username", csv="created_by.username"),
        Column("created", gettext_lazy("Saved"), order_by="created_at", csv="created_at"),
        Column("actions", gettext_lazy("Actions"), csv=False),
    ]
    csv_name = "workload-templates"


@require_safe
@login_required
def workload_detail(request, pk: int):
    from apps.workloads.rendering import render_workload, rendering_title

    workload = get_object_or_404(
        Workload.objects.for_user(request.user, "view").select_related(
            "tenant", "queue", "tier", "cluster", "gpu_model", "created_by", "admission"
        ),
        pk=pk,
    )
    status = {
        "workload": workload,
        "events": workload.events.all(),
        "panels": status_panels(workload),  # e.g. its cost (chargeback)
    }
    if is_htmx(request):  # the status block polls itself while the workload runs
        return vary_on_htmx(render(request, "workloads/_workload_status.html", {**status, "polled": True}))
    text, error = render_workload(workload)
    inference = workload.kind == "inference"
    return vary_on_htmx(
        render(
            request,
            "workloads/workload_detail.html",
            {
                **status,
                "rendered": text,
                "rendered_title": rendering_title(workload),
                "render_error": error,
                "spec_json": json.dumps(workload.spec, indent=2, sort_keys=True),
                "service_panel": inference,
                "serving_topology": serving_topology(workload) if inference else None,
                "cold_starts": cold_starts(workload) if inference else None,
                "can_set_slo": inference and has_perm(request.user, Action.MANAGE, workload.tenant),
                "can_cancel": has_perm(request.user, Action.SUBMIT, workload.tenant),
            },
        )
    )


ROUTERS = {"sglang": "sglang_router", "vllm": "vllm-router"}  # the router programs (docs/inference.md)


def serving_topology(workload) -> dict | None:
    """A routed service's parts for its page: the router (which one, its routing, PD or not) and each engine pool's
    replicas and GPUs, all in the workload's state (the simulator and the backends run them together); None for a
    plain Service in front of the replicas (docs/inference.md: routing)."""
    spec = workload.spec or {}
    split = spec.get("disaggregation")
    routing = spec.get("routing", "round-robin")
    if not split and routing == "round-robin":
        return None
    tp = spec.get("tensor_parallel", 1)
    if split:
        pools = [
            {"role": role, "replicas": split[role]["replicas"], "gpus": split[role].get("gpus_per_replica") or tp}
            for role in ("prefill", "decode")
        ]
    else:
        pools = [{"role": "server", "replicas": spec.get("replicas", 1), "gpus": tp}]
    return {
        "router": ROUTERS.get(spec.get("engine", "vllm"), ""),
        "routing": routing,
        "pd": bool(split),
        "state": workload.state,
        "pools": pools,
    }


@require_safe
@login_required
def workload_logs(request, pk: int):
    """The workload's log, a live tail streamed from its cluster by static/js/workload_logs.js (the API's
    GET /api/v1/workloads/{id}/logs/), with a link to the cluster's log system or how to read them there."""
    workload = get_object_or_404(
        Workload.objects.for_user(request.user, "view").select_related("tenant", "queue", "cluster"), pk=pk
    )
    workers = worker_count(workload)
    inference = workload.kind == "inference"
    labels = {
        "following": _("Following the log as it is written…"),
        "reading": _("Reading the log…"),
        "ended": _("The log ends here."),
        "limit": _("The server ended the stream at its time limit: following again."),
        "broken": _("The connection to the server broke off: following again in a moment."),
        "broken_read": _("The connection to the server broke off: change a setting to read again."),
        "waiting": _("Asking again in %(seconds)s s."),
        "paused": _("New lines keep coming below: scroll to the end to keep up with them."),
    }
    context = {
        "workload": workload,
        "logs": logs_for(workload),
        "streams": streams_logs(workload),
        "workers": range(workers),
        "inference": inference,
        "follow": not workload.is_finished,
        # Following every worker of a wide gang is refused: the page then starts on worker 0.
        "first_worker": "" if workers <= settings.LOGS_FOLLOW_MAX_WORKERS else "0",
        "follow_max_s": settings.LOGS_FOLLOW_MAX_S,
        "log_labels": labels,
    }
    return render(request, "workloads/workload_logs.html", context)


@require_POST
@login_required
def workload_cancel(request, pk: int):
    workload = get_object_or_404(Workload.objects.for_user(request.user, "view"), pk=pk)
    try:
        services.cancel_workload(request.user, workload, reason=request.POST.get("reason", ""))
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Cancelling %(name)s.") % {"name": workload.name})
    return redirect("workloads:workload_detail", pk=pk)


def _example(kind: str, choices: SubmitChoices) -> dict:
    """The example a fresh form starts from, on the user's first queue and GPU model."""
    example = dict(EXAMPLES.get(kind, EXAMPLES["training"]))
    if choices.queues:
        example["tenant"], example["queue"] = choices.queues[0][0].split("/", 1)
    else:  # no queue to offer: none chosen (the previews ask for one)
        del example["tenant"], example["queue"]
    models = [code for code, _label in choices.gpu_models]
    if models and example["gpu_model"] not in models:
        example["gpu_model"] = models[0]
    return example


def _chosen_template(request, templates):
    picked = request.POST.get("template", "") if request.method == "POST" else request.GET.get("template", "")
    return templates.filter(pk=picked).first() if picked.isdigit() else None


def _page(request, form: SpecForm, templates, chosen, *, message: str = "", status: int = 200):
    return render(
        request,
        "workloads/workload_submit.html",
        {
            "form": form,
            "templates": templates[:100],
            "chosen": chosen,
            "message": message,
            "previews": submit_previews(),
        },
        status=status,
    )


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def workload_submit(request):
    """The submit form, generated from the spec's JSON Schema, with live previews beside it (`submit_preview`).

    A template fills it; the YAML box holds the same spec for those who prefer text. Submitting goes through
    `submit_workload` (a template is recorded with the workload); a spec the service refuses comes back with the
    form filled and each error at its field (400)."""
    templates = WorkloadTemplate.objects.for_user(request.user, "view").select_related("tenant")
    chosen = _chosen_template(request, templates)
    choices = SubmitChoices.for_user(request.user)
    if request.method != "POST":
        kind = chosen.kind if chosen else request.GET.get("kind", "training")
        spec = {**chosen.spec, "tenant": chosen.tenant.slug} if chosen else _example(kind, choices)
        return _page(request, SpecForm(request.user, kind, spec=spec, choices=choices), templates, chosen)
    form = SpecForm(request.user, request.POST.get("kind", "training"), request.POST, choices=choices)
    spec = form.spec()
    if spec is None:
        return _page(request, form, templates, chosen, message=_("Fix the fields marked below."), status=400)
    try:
        workload, _new = services.submit_workload(request.user, kind=form.kind, spec=spec, template=chosen)
    except ServiceError as exc:
        form.add_errors(exc.fields)
        return _page(request, form, templates, chosen, message=exc.message, status=exc.status_code)
    workload.refresh_from_db()  # the submission may have reached the backend as the transaction committed
    messages.success(
        request,
        _("Submitted %(name)s: %(state)s.") % {"name": workload.name, "state": workload.get_state_display()},
    )
    return redirect("workloads:workload_detail", pk=workload.pk)


@require_POST
@login_required
def submit_editor(request):
    """The spec editor in the other mode, changing nothing: the fields as YAML (`to=yaml`), or the YAML box's spec
    in the fields (`to=fields`); YAML that cannot be read, or with fields the form has no input for, stays YAML
    with the error at the box."""
    choices = SubmitChoices.for_user(request.user)
    form = SpecForm(request.user, request.POST.get("kind", "training"), request.POST, choices=choices)
    if request.POST.get("to") == SpecForm.YAML and form.mode == SpecForm.FIELDS:
        spec = form.spec()
        if spec is not None:
            form = SpecForm(request.user, form.kind, {"mode": SpecForm.YAML, "spec": form.yaml_text()}, choices=choices)
    elif request.POST.get("to") == SpecForm.FIELDS and form.mode == SpecForm.YAML:
        spec = form.spec()
        if spec is not None:
            unknown = form.without_inputs(spec)
            if unknown:
                form.errors.setdefault("spec", []).append(
                    _("The form has no field for %(fields)s: keep editing it as YAML.") % {"fields": ", ".join(unknown)}
                )
            else:
                form = SpecForm(request.user, form.kind, spec=spec, choices=choices)
    return render(request, "workloads/_spec_editor.html", {"form": form})


@require_POST
@login_required
def submit_preview(request, key: str):
    """One live preview of the spec being edited (the form's fields or its YAML), as an HTML fragment, changing
    nothing: what the submission's own checks and the registered preview (`register_submit_preview`) say. A spec
    with errors previews nothing ("fix the spec first"); the first preview also sends the errors, by field, for the
    page to show at the fields (the `spec-errors` event). Refusals are a submission's: 403 without the right to
    submit to the tenant, 404 for a tenant one cannot see."""
    from apps.workloads.services.previews import preview_submission

    preview = submit_preview_named(key)
    if preview is None:
        raise Http404(key)
    form = SpecForm(request.user, request.POST.get("kind", "training"), request.POST)
    context = {"preview": preview, "title": _(preview.title)}
    status = 200
    spec = form.spec()
    if spec is None:
        context["fix"] = True
    elif not spec.get("tenant") or not spec.get("queue"):  # nothing to decide on yet: not another tenant's
        context["choose_queue"] = True
    else:
        try:
            prepared = preview_submission(request.user, form.kind, spec)
            context.update(preview.context(request.user, prepared))
        except (Forbidden, NotFound) as exc:
            context["refused"], status = exc.message, exc.status_code
        except ServiceError as exc:
            form.add_errors(exc.fields)
            context["fix"] = True
            if not exc.fields or not exc.message.startswith(
                ("Invalid", pgettext("start of a generic error headline", "Invalid"))
            ):
                context["message"] = exc.message  # says more than the notes at the fields ("not bound yet")
    response = render(request, "workloads/_submit_preview.html", context, status=status)
    if submit_previews()[0].key == key:  # the field errors once, not once per preview
        errors = {"fields": form.errors, "general": form.general, "mode": form.mode}
        response["HX-Trigger"] = json.dumps({"spec-errors": errors})  # ASCII (\u escapes): a header
    return response
