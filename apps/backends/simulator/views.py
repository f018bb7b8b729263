"""The simulated dcgm-exporter over HTTP: GET /simulator/<cluster>/nodes/<node>/metrics.

No authentication, like a real exporter on :9400; it serves only clusters of kind `simulated`.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from apps.backends.simulator.exporter import scrape
from apps.backends.simulator.telemetry import CONTENT_TYPE


@require_GET
def node_metrics(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    answer = scrape(cluster, node)
    return HttpResponse(answer.body, status=answer.status, content_type=CONTENT_TYPE)
