"""Operation pages; the detail page polls itself with htmx while the operation runs and links to what it acts on."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_safe

from apps.core.views import ScopedListView
from apps.operations.filtersets import OperationFilterSet
from apps.operations.models import Operation


class OperationListView(ScopedListView):
    model = Operation
    filterset_class = OperationFilterSet
    select_related = ("actor", "tenant")
    template_name = "operations/operation_list.html"


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
    if request.headers.get("HX-Request"):
        return render(request, "operations/_operation_status.html", {"operation": operation})
    return render(
        request,
        "operations/operation_detail.html",
        {"operation": operation, "links": related_links(operation)},
    )
