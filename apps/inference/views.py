"""The service telemetry on the workload page: a polled status partial (with the series as JSON) and the SLO form."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from apps.core.errors import ServiceError
from apps.inference import services
from apps.inference.forms import SloForm
from apps.inference.series import DEFAULT_WINDOW, WINDOWS, service_status, telemetry_series
from apps.workloads.models import Workload, WorkloadKind


def _service(request, pk: int) -> Workload:
    return get_object_or_404(
        Workload.objects.for_user(request.user, "view").filter(kind=WorkloadKind.INFERENCE).select_related("tenant"),
        pk=pk,
    )


@require_safe
@login_required
def service_telemetry(request, pk: int):
    """The partial the workload page polls: freshness, SLO and burn rates, and the chart data."""
    workload = _service(request, pk)
    window = request.GET.get("window", DEFAULT_WINDOW)
    if window not in WINDOWS:
        window = DEFAULT_WINDOW
    status = service_status(workload)
    data = {"series": telemetry_series(workload, window), "slo": status["slo"], "window": window}
    return render(
        request,
        "inference/_telemetry.html",
        {
            "workload": workload,
            "status": status,
            "data": data,
            "window": window,
            "objective_percent": f"{status['slo']['objective'] * 100:g}",
        },
    )


@require_POST
@login_required
def service_slo(request, pk: int):
    workload = _service(request, pk)
    form = SloForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
        return redirect("workloads:workload_detail", pk=pk)
    try:
        services.set_slo(request.user, workload, **form.cleaned_data)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("SLO of %(name)s updated.") % {"name": workload.name})
    return redirect("workloads:workload_detail", pk=pk)
