"""Webhooks and telemetry sources under the outbound policy's production default (tests/conftest.py allows
loopback for the suite's fake servers; these tests put the default back): refused when saved, with a 400 naming
the field and why, and refused again when the worker would call them (rows saved before, names that resolve
differently since)."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.health.models import TelemetrySource
from apps.health.sources import query_prometheus, scrape_exporters
from apps.inference.sources import FetchError, fetch_http
from apps.notifications.models import Notification, NotificationChannel
from apps.notifications.services import send_notification
from tests.health.http_helpers import serve
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db

INSIDE = [
    ("http://169.254.169.254/latest/meta-data/iam/", "link-local"),
    ("http://10.0.0.1/hook", "private"),
    ("http://localhost:6379/", "loopback"),
    ("http://[::1]:8080/hook", "loopback"),
    ("http://[::ffff:127.0.0.1]/hook", "loopback"),
    ("http://100.100.100.200/latest/meta-data/", "metadata"),
]


@pytest.fixture
def production(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []


@pytest.mark.parametrize(("target", "why"), INSIDE)
@pytest.mark.parametrize("who", ["tenant_admin_a", "platform_admin"])
def test_a_webhook_inside_the_network_is_refused_when_saved(production, personas, api, who, target, why):
    body = {"kind": "webhook", "target": target} | ({"tenant": "a"} if who == "tenant_admin_a" else {})
    response = api(fresh(personas.user(who))).post("/api/v1/notification-channels/", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()
    assert why in error["message"] and why in error["fields"]["target"][0] and "OUTBOUND_ALLOWED_NETWORKS" in str(error)
    assert not NotificationChannel.objects.exists()
    assert not AuditEvent.objects.filter(action="health.channel.add").exists()


def test_only_the_deployment_widens_the_policy(production, settings, personas, api):
    """Nothing a tenant admin sends can allow an address; the deployment's setting does."""
    import ipaddress

    client = api(fresh(personas.tenant_admin_a))
    body = {"tenant": "a", "kind": "webhook", "target": "http://10.0.0.1/hook"}
    assert client.post("/api/v1/notification-channels/", body, format="json").status_code == 400
    settings.OUTBOUND_ALLOWED_NETWORKS = [ipaddress.ip_network("10.0.0.0/24")]
    assert client.post("/api/v1/notification-channels/", body, format="json").status_code == 201
    body["target"] = "http://10.0.1.1/hook"
    assert client.post("/api/v1/notification-channels/", body, format="json").status_code == 400


def test_the_worker_refuses_a_webhook_saved_before_and_records_why(production):
    """A receiver on loopback (as Redis or the console itself would be): the worker never calls it, and the
    notification fails at once with the reason (a retry would be refused alike)."""
    with serve() as server:
        note = Notification.objects.create(
            kind="webhook", target=server.url + "/hook", audience="on-call", subject="s", text="t"
        )
        assert send_notification(note.pk) == "failed"
        assert server.received == []
    note.refresh_from_db()
    assert note.status == "failed" and note.attempts == 1
    assert "127.0.0.1 is a loopback address" in note.last_error and "OUTBOUND_ALLOWED_NETWORKS" in note.last_error


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("prometheus_url", "http://169.254.169.254/", "link-local"),
        ("prometheus_url", "http://127.0.0.1:9090", "loopback"),
        ("url_pattern", "http://10.1.2.3:9400/metrics?node={node}", "private"),
        ("url_pattern", "http://localhost:9400/{node}", "loopback"),
    ],
)
def test_a_telemetry_source_inside_the_network_is_refused(production, fleet, personas, api, field, value, why):
    kind = "prometheus" if field == "prometheus_url" else "exporter"
    response = api(fresh(personas.platform_admin)).post(
        "/api/v1/telemetry-sources/", {"cluster": "hsim", "kind": kind, field: value}, format="json"
    )
    assert response.status_code == 400 and why in response.json()["fields"][field][0]
    assert not TelemetrySource.objects.exclude(kind="simulator").exists()


def test_a_node_name_in_the_host_is_checked_when_scraped(production, fleet, personas, api):
    """`http://{node}:9400/metrics` cannot be resolved when saved: it is saved, and each scrape checks it."""
    response = api(fresh(personas.platform_admin)).post(
        "/api/v1/telemetry-sources/",
        {"cluster": "hsim", "kind": "exporter", "url_pattern": "http://{node}:9400/metrics"},
        format="json",
    )
    assert response.status_code == 201
    outcomes = scrape_exporters("http://{node}:9400/metrics", "hsim", ["localhost"], None, 2)
    assert "refused: localhost resolves to 127.0.0.1, a loopback address" in outcomes["localhost"].message


def test_scrapes_are_refused_when_called(production):
    with serve({"/gpu-1": (200, "DCGM_FI_DEV_GPU_TEMP 40\n")}) as server:
        exporters = scrape_exporters(server.url + "/{node}", "c", ["gpu-1"], None, 2)
        prometheus = query_prometheus(server.url, ["gpu-1"], None, 2)
        engines = fetch_http({1: server.url + "/metrics"})
        assert server.queries == []
    assert exporters["gpu-1"].message.startswith("refused: 127.0.0.1 is a loopback address")
    assert "refused: 127.0.0.1 is a loopback address" in prometheus["gpu-1"].message
    assert isinstance(engines[1], FetchError) and str(engines[1]).startswith("refused: 127.0.0.1 is a loopback")
