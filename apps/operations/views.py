"""Operation pages; the detail page polls itself with htmx while the operation runs."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from apps.core.views import ScopedListView
from apps.operations.filtersets import OperationFilterSet
from apps.operations.models import Operation


class OperationListView(ScopedListView):
    model = Operation
    filterset_class = OperationFilterSet
    select_related = ("actor", "tenant")
    template_name = "operations/operation_list.html"


@require_safe
@login_required
def operation_detail(request, pk: int):
    operation = get_object_or_404(
        Operation.objects.for_user(request.user, "view").select_related("actor", "tenant"), pk=pk
    )
    template = (
        "operations/_operation_status.html" if request.headers.get("HX-Request") else "operations/operation_detail.html"
    )
    return render(request, template, {"operation": operation})
