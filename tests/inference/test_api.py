"""The service API and page: series over a window, SLO edits, alerts; another tenant's service does not exist."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.inference.models import ServiceSlo, TelemetrySample
from apps.inference.scrape import scrape_services
from tests.inference.conftest import run_service
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def service(serving, personas, django_capture_on_commit_callbacks):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    now = timezone.now()
    TelemetrySample.objects.bulk_create(
        [
            TelemetrySample(workload=workload, time=now - timedelta(minutes=m), ttft_p99=0.5 + m / 100, replicas=1)
            for m in (90, 30, 10, 1)
        ]
    )
    return workload


def test_telemetry_series_over_a_window(service, personas, api):
    response = api(fresh(personas.member_a)).get(f"/api/v1/services/{service.pk}/telemetry/?window=1h")
    assert response.status_code == 200
    body = response.json()
    assert body["window"] == "1h" and body["service"] == service.pk
    assert body["series"]["ttft_p99"] == [0.8, 0.6, 0.51]  # the 90-minute-old sample is outside the hour
    assert len(body["series"]["time"]) == 3 and body["series"]["replicas"] == [1, 1, 1]
    assert body["slo"] == {"ttft_target_s": 2.0, "tpot_target_s": 0.1, "objective": 0.99, "custom": False}
    assert body["burn_rates"]["ttft"]["fast"]["threshold"] == 14.4
    assert body["telemetry"]["status"] == "never" and body["alerts"] == []


def test_unknown_window_is_a_400_naming_the_field(service, personas, api):
    response = api(fresh(personas.member_a)).get(f"/api/v1/services/{service.pk}/telemetry/?window=2d")
    assert response.status_code == 400
    assert "window" in json.dumps(response.json())


@pytest.mark.parametrize("path", ["", "telemetry/", "slo/", "alerts/"])
def test_another_tenants_service_is_404(service, personas, api, path):
    assert api(fresh(personas.member_b)).get(f"/api/v1/services/{service.pk}/{path}").status_code == 404


def test_service_list_holds_inference_services_in_scope(service, personas, api):
    assert [s["id"] for s in api(fresh(personas.member_a)).get("/api/v1/services/").json()["results"]] == [service.pk]
    assert api(fresh(personas.member_b)).get("/api/v1/services/").json()["results"] == []


def test_put_slo_tenant_admin_only(service, personas, api):
    url = f"/api/v1/services/{service.pk}/slo/"
    body = {"ttft_target_s": 1.0, "objective": 0.995, "reason": "tighter"}
    assert api(fresh(personas.member_a)).put(url, body, format="json").status_code == 403
    assert api(fresh(personas.member_b)).put(url, body, format="json").status_code == 404
    response = api(fresh(personas.tenant_admin_a)).put(url, body, format="json")
    assert response.status_code == 200
    assert response.json() == {"ttft_target_s": 1.0, "tpot_target_s": 0.1, "objective": 0.995, "custom": True}
    bad = api(fresh(personas.tenant_admin_a)).put(url, {"objective": 2}, format="json")
    assert bad.status_code == 400 and "objective" in bad.json()["fields"]
    unknown = api(fresh(personas.tenant_admin_a)).put(url, {"p99": 2}, format="json")
    assert unknown.status_code == 400


def test_service_page_polls_the_telemetry_partial(service, personas, client):
    client.force_login(personas.tenant_admin_a)
    page = client.get(reverse("workloads:workload_detail", args=[service.pk])).content.decode()
    assert 'data-testid="service-telemetry"' in page and 'data-testid="slo-form"' in page
    assert reverse("inference:service_telemetry", args=[service.pk]) in page
    assert "vendor/plotly/plotly-cartesian.min.js" in page
    client.force_login(personas.member_a)
    page = client.get(reverse("workloads:workload_detail", args=[service.pk])).content.decode()
    assert 'data-testid="slo-form"' not in page  # members see the SLO, tenant admins set it
    partial = client.get(reverse("inference:service_telemetry", args=[service.pk]) + "?window=6h")
    found = re.search(r'id="service-telemetry-data"[^>]*>(.*?)</script>', partial.content.decode(), re.S)
    data = json.loads(found.group(1))
    assert data["window"] == "6h" and len(data["series"]["time"]) == 4
    client.force_login(personas.member_b)
    assert client.get(reverse("inference:service_telemetry", args=[service.pk])).status_code == 404


def test_stale_telemetry_is_shown(serving, personas, client, django_capture_on_commit_callbacks):
    from apps.backends.models import SimWorkload

    workload = run_service(personas, django_capture_on_commit_callbacks)
    # The engine stops serving before the console has heard: the simulator answers 503.
    SimWorkload.objects.filter(name=workload.backend_name).update(state="failed")
    scrape_services()
    client.force_login(personas.member_a)
    partial = client.get(reverse("inference:service_telemetry", args=[workload.pk])).content.decode()
    assert 'data-testid="telemetry-stale"' in partial and "is not serving" in partial


def test_html_slo_form_sets_it(service, personas, client):
    client.force_login(personas.tenant_admin_a)
    response = client.post(
        reverse("inference:service_slo", args=[service.pk]),
        {"ttft_target_s": "3", "tpot_target_s": "0.05", "objective": "0.99", "reason": "batch users"},
    )
    assert response.status_code == 302
    assert ServiceSlo.objects.get(workload=service).tpot_target_s == 0.05
