"""Workload pages: the list, one workload (spec, rendering, timeline, placement), and the submit form."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from apps.accounts.permissions import has_perm
from apps.accounts.roles import Action
from apps.core.errors import ServiceError
from apps.core.forms import apply_service_error
from apps.core.tables import Column
from apps.core.views import ScopedListView, is_htmx, vary_on_htmx
from apps.workloads import services
from apps.workloads.filtersets import TemplateFilterSet, WorkloadFilterSet
from apps.workloads.forms import SubmitForm
from apps.workloads.logs import logs_for, streams_logs, worker_count
from apps.workloads.models import Workload, WorkloadTemplate
from apps.workloads.panels import status_panels

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
                "can_set_slo": inference and has_perm(request.user, Action.MANAGE, workload.tenant),
                "can_cancel": has_perm(request.user, Action.SUBMIT, workload.tenant),
            },
        )
    )


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


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def workload_submit(request):
    kind = request.GET.get("kind", "training")
    initial = {"kind": kind, "spec": json.dumps(EXAMPLES.get(kind, EXAMPLES["training"]), indent=2)}
    templates = WorkloadTemplate.objects.for_user(request.user, "view").select_related("tenant")
    chosen = None
    picked = request.POST.get("template", "") if request.method == "POST" else request.GET.get("template", "")
    if picked.isdigit():
        chosen = templates.filter(pk=picked).first()
        if chosen is not None and request.method != "POST":
            initial = {"kind": chosen.kind, "template": chosen.pk, "spec": "{}"}
    form = SubmitForm(request.POST or None, user=request.user, initial=initial)
    if chosen is not None:  # the spec box holds only what changes: the template's own spec is shown beside it
        form.fields["spec"].label = _("Overrides (JSON)")
        form.fields["spec"].help_text = _(
            'Only the fields to change, e.g. {"name": "pretrain-2"}; they are merged into the template\'s spec '
            "(null removes a key)."
        )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if data["template"] is not None:
                workload, _new = services.submit_from_template(request.user, data["template"], overrides=data["spec"])
            else:
                workload, _new = services.submit_workload(request.user, kind=data["kind"], spec=data["spec"])
        except ServiceError as exc:
            apply_service_error(form, exc)
        else:
            workload.refresh_from_db()  # the submission may have reached the backend as the transaction committed
            messages.success(
                request,
                _("Submitted %(name)s: %(state)s.") % {"name": workload.name, "state": workload.get_state_display()},
            )
            return redirect("workloads:workload_detail", pk=workload.pk)
    return render(
        request,
        "workloads/workload_submit.html",
        {
            "form": form,
            "templates": templates[:100],
            "chosen": chosen,
            "chosen_spec": json.dumps(chosen.spec, indent=2, sort_keys=True) if chosen else "",
        },
    )
