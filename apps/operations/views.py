"""Operation pages; the detail page and the list poll themselves with htmx while operations run."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
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


@require_safe
@login_required
def operation_detail(request, pk: int):
    operation = get_object_or_404(
        Operation.objects.for_user(request.user, "view").select_related("actor", "tenant"), pk=pk
    )
    template = "operations/_operation_status.html" if is_htmx(request) else "operations/operation_detail.html"
    return vary_on_htmx(render(request, template, {"operation": operation}))
