"""The simulated exporters over HTTP: GET /simulator/<cluster>/nodes/<node>/metrics (dcgm-exporter) and
/simulator/<cluster>/services/<name>/metrics (an inference service's vLLM or SGLang engines).

No authentication, like a real exporter on :9400 or an engine's API port; only clusters of kind `simulated`.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from apps.backends.simulator.exporter import scrape, scrape_service
from apps.backends.simulator.telemetry import CONTENT_TYPE


@require_GET
def node_metrics(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    answer = scrape(cluster, node)
    return HttpResponse(answer.body, status=answer.status, content_type=CONTENT_TYPE)


@require_GET
def service_metrics(request: HttpRequest, cluster: str, name: str) -> HttpResponse:
    answer = scrape_service(cluster, name)
    return HttpResponse(answer.body, status=answer.status, content_type=CONTENT_TYPE)
