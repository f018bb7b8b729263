"""GPU health pages: fleet health, node health, the incident board and detail, the rule set editor."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Case, IntegerField, Value, When
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from apps.accounts.permissions import allowed_tenant_ids, has_perm
from apps.core.errors import Forbidden, ServiceError
from apps.core.tables import Column
from apps.core.value_labels import value_label
from apps.core.views import ScopedListView, is_htmx, vary_on_htmx
from apps.fleet.models import Node
from apps.fleet.owners import WorkloadNames
from apps.health.filtersets import IncidentFilterSet
from apps.health.forms import NodeActionForm, RuleTuneForm, TransitionForm
from apps.health.models import SEVERITY_RANK, Incident, NodeHealth, RuleAction, RuleSet, Severity
from apps.health.overview import fleet_summary, node_gpus
from apps.health.services import runbook
from apps.health.services.incidents import transition_incident
from apps.health.services.rulesets import active_ruleset, tune_rule


@require_safe
@login_required
def fleet_health(request):
    nodes = Node.objects.for_user(request.user, "view")
    return render(request, "health/fleet_health.html", fleet_summary(nodes))


def _node_label(incident: Incident) -> str:
    return f"{incident.node.cluster.name}/{incident.node.name}"


SEVERITY_ORDER = Case(
    *[When(severity=s, then=Value(rank)) for s, rank in SEVERITY_RANK.items()], output_field=IntegerField()
)


class IncidentListView(ScopedListView):
    model = Incident
    filterset_class = IncidentFilterSet
    select_related = ("node__cluster",)
    template_name = "health/incident_list.html"
    partial_template_name = "health/_incident_list_region.html"
    tenant_field = None
    columns = [
        Column("id", "#", order_by="id", csv="pk"),
        Column("severity", gettext_lazy("Severity"), order_by=(SEVERITY_ORDER,)),
        Column("title", gettext_lazy("Incident"), order_by="title"),
        Column(
            "node",
            gettext_lazy("Node"),
            order_by=("node__cluster__name", "node__name"),
            csv=_node_label,
        ),
        Column("cause", gettext_lazy("Cause"), csv="cause", shown=False),
        Column("state", gettext_lazy("State"), order_by="state"),
        Column("detected", gettext_lazy("Detected"), order_by="detected_at", csv="detected_at"),
        Column("closed", gettext_lazy("Closed"), csv="closed_at", shown=False),
        Column("waiting_for", gettext_lazy("Waiting for a human because"), csv="waiting_for"),
    ]
    default_sort = "-detected"
    csv_name = "incidents"

    poll_seconds = 15

    def is_live(self, rows) -> bool:
        return True  # the board is where new incidents appear: it always refreshes


@require_safe
@login_required
def incident_detail(request, pk: int):
    incident = get_object_or_404(Incident.objects.for_user(request.user, "view").select_related("node__cluster"), pk=pk)
    template = "health/_incident_live.html" if is_htmx(request) else "health/incident_detail.html"
    # An incident touches every tenant whose work was on the node: name only those the user may view.
    ids = allowed_tenant_ids(request.user, "view")
    every_workload = list(incident.workloads.select_related("tenant", "created_by"))
    every_tenant = list(incident.tenants.all())
    workloads = [w for w in every_workload if ids is None or w.tenant_id in ids]
    tenants = [t for t in every_tenant if ids is None or t.pk in ids]
    response = render(
        request,
        template,
        {
            "incident": incident,
            "events": incident.events.all(),
            "workloads": workloads,
            "other_workloads": range(len(every_workload) - len(workloads)),
            "tenants": tenants,
            "other_tenants": len(every_tenant) > len(tenants),
            "can_operate": has_perm(request.user, "operate"),
            "form": TransitionForm(),
        },
    )
    return vary_on_htmx(response)


@require_POST
@login_required
def incident_transition(request, pk: int):
    incident = get_object_or_404(Incident.objects.for_user(request.user, "view"), pk=pk)
    try:
        transition_incident(request.user, incident, request.POST.get("to", ""), request.POST.get("reason", ""))
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            _("Incident #%(id)s is now %(state)s.")
            % {"id": incident.pk, "state": value_label(request.POST.get("to"), "incident state")},
        )
    return redirect("health:incident_detail", pk=pk)


@require_safe
@login_required
def node_health(request, pk: int):
    node = get_object_or_404(
        Node.objects.for_user(request.user, "view").select_related("cluster", "pool", "gpu_model"), pk=pk
    )
    if is_htmx(request):  # the page's poll: status, running operation and incidents only (no telemetry series)
        context = {
            "node": node,
            "health": NodeHealth.objects.filter(pk=node.pk).first(),
            "operation": runbook.running_operation(node),
            "incidents": node.incidents.select_related("node__cluster").order_by("-detected_at")[:20],
        }
        return vary_on_htmx(render(request, "health/_node_live.html", context))
    health, gpus = node_gpus(node)
    names = WorkloadNames(request.user, [(node.cluster_id, g["pod"]) for g in gpus])
    for g in gpus:  # the pod on each GPU, named only where the user may view its tenant
        shown = names.shown(node.cluster_id, g["pod"])
        if shown != g["pod"]:
            g["pod"], g["namespace"] = shown, ""
    preview_action = request.GET.get("preview", "")
    preview, preview_error = None, ""
    if preview_action:
        try:
            preview = runbook.impact(request.user, node, preview_action)
        except Forbidden as exc:  # the preview names every tenant's work on the node: operators only
            raise PermissionDenied(exc.message) from exc
        except ServiceError as exc:
            preview_error = exc.message
    return render(
        request,
        "health/node_health.html",
        {
            "node": node,
            "health": health,
            "gpus": gpus,
            "sparklines": {g["index"]: g["series"] for g in gpus},
            "incidents": node.incidents.select_related("node__cluster").order_by("-detected_at")[:20],
            "operation": runbook.running_operation(node),
            "can_operate": has_perm(request.user, "operate"),
            "actions": list(runbook.ACTIONS),
            "preview": preview,
            "preview_action": preview_action,
            "preview_error": preview_error,
            "preview_tenants": sorted({w["tenant"] for w in preview.evicted}) if preview else [],
            "reason": request.GET.get("reason", ""),
        },
    )


@require_POST
@login_required
def node_action(request, pk: int):
    node = get_object_or_404(Node.objects.for_user(request.user, "view"), pk=pk)
    form = NodeActionForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Choose an action."))
        return redirect("health:node_health", pk=pk)
    incident = None
    if form.cleaned_data["incident"]:
        incident = (
            Incident.objects.for_user(request.user, "view").filter(pk=form.cleaned_data["incident"], node=node).first()
        )
    try:
        operation = runbook.node_action(
            request.user, node, form.cleaned_data["action"], reason=form.cleaned_data["reason"], incident=incident
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
        running = exc.data.get("operation") if exc.data else None
        if running:
            return redirect("operations:operation_detail", pk=running["id"])
        if incident is not None:  # back where the action was started
            return redirect("health:incident_detail", pk=incident.pk)
        return redirect("health:node_health", pk=pk)
    return redirect("operations:operation_detail", pk=operation.pk)


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def rules(request):
    ruleset = active_ruleset()
    can_tune = has_perm(request.user, "administer")
    errors: dict[str, str] = {}
    if request.method == "POST":
        form = RuleTuneForm(request.POST)
        if not can_tune:
            messages.error(request, _("Only platform admins tune health rules."))
        elif not form.is_valid():
            errors[request.POST.get("key", "")] = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        else:
            data = dict(form.cleaned_data)
            key, reason = data.pop("key"), data.pop("reason")
            try:
                tuned = tune_rule(request.user, key, reason=reason, **data)
            except ServiceError as exc:
                errors[key] = exc.message
            else:
                messages.success(
                    request,
                    _("Rule %(key)s changed: the rules are now version %(version)s.")
                    % {"key": key, "version": tuned.version},
                )
                return redirect("health:rules")
    return render(
        request,
        "health/rules.html",
        {
            "ruleset": ruleset,
            "rows": [(rule, errors.get(rule.key, "")) for rule in ruleset.rules.order_by("key")],
            "severities": Severity.choices,
            "rule_actions": RuleAction.choices,
            "versions": RuleSet.objects.select_related("created_by")[:20],
            "can_tune": can_tune,
            "errors": errors,
        },
    )
