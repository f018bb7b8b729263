"""Operation pages; the detail page and the list poll themselves with htmx while operations run; the detail page
links to what the operation acts on."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_safe

from apps.core.tables import Column
from apps.core.views import ScopedListView, is_htmx, vary_on_htmx
from apps.operations.filtersets import OperationFilterSet
from apps.operations.models import Operation


class OperationListView(ScopedListView):
    model = Operation
    filterset_class = OperationFilterSet
    select_related = ("actor", "tenant")
    template_name = "operations/operation_list.html"
    partial_template_name = "operations/_operation_table.html"
    poll_seconds = 5
    columns = [
        Column("id", "#", order_by="id", csv="pk"),
        Column("kind", _("Kind"), order_by="kind"),
        Column("target", _("Target"), order_by="target_label", csv="target_label"),
        Column("tenant", _("Tenant"), csv="tenant.slug", shown=False),
        Column("status", _("Status"), order_by="status"),
        Column("progress", _("Progress"), order_by="progress"),
        Column("actor", _("By"), order_by="actor__username", csv="actor.username"),
        Column("created", _("Created"), order_by="created_at", csv="created_at"),
        Column("finished", _("Finished"), csv="finished_at", shown=False),
        Column("reason", _("Reason"), csv="reason", shown=False),
        Column("error", _("Error"), csv="error", shown=False),
    ]
    default_sort = "-created"
    csv_name = "operations"

    def is_live(self, rows) -> bool:
        return any(not op.is_finished for op in rows)


def related_links(operation: Operation) -> list[tuple[str, str]]:
    """(label, URL) of the pages an operation acts on, so that its page leads back: the node, the cluster, the
    incidents it concerns. Targets are stored by type and id; only the kinds that exist are known here."""
    links = []
    target_id = operation.target_id
    if operation.target_type == "fleet.node" and target_id.isdigit():
        links.append(
            (
                gettext("Node %(name)s: GPU health and runbook actions") % {"name": operation.target_label},
                reverse("health:node_health", args=[int(target_id)]),
            )
        )
    elif operation.target_type == "fleet.cluster" and operation.target_label:
        links.append(
            (
                gettext("Cluster %(name)s") % {"name": operation.target_label},
                reverse("fleet:cluster_detail", args=[operation.target_label]),
            )
        )
    # The incident it was started for, and those a runbook action moved along (its result lists them).
    incidents = [(operation.params or {}).get("incident_id"), *(operation.result or {}).get("incidents", [])]
    for incident_id in dict.fromkeys(i for i in incidents if isinstance(i, int)):
        links.append(
            (gettext("Incident #%(id)s") % {"id": incident_id}, reverse("health:incident_detail", args=[incident_id]))
        )
    return links


@require_safe
@login_required
def operation_detail(request, pk: int):
    operation = get_object_or_404(
        Operation.objects.for_user(request.user, "view").select_related("actor", "tenant"), pk=pk
    )
    if is_htmx(request):
        return vary_on_htmx(render(request, "operations/_operation_status.html", {"operation": operation}))
    return vary_on_htmx(
        render(
            request,
            "operations/operation_detail.html",
            {"operation": operation, "links": related_links(operation)},
        )
    )
