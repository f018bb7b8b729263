"""The incident and node health pages update in place: their partials, and polling that stops when it is over."""

import pytest
from django.urls import reverse

from apps.health.models import Incident
from tests.health.conftest import cycle, inject
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def faulted(fleet, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    cycle(cluster)
    inject(cluster, "gpu-0003", "xid79", 5)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    return Incident.objects.get(cause="xid-79")


def test_incident_page_polls_until_the_incident_closes(faulted, personas, client):
    client.force_login(fresh(personas.oncall))
    url = reverse("health:incident_detail", args=[faulted.pk])
    page = client.get(url)
    body = page.content.decode()
    assert f'id="incident-main" hx-get="{url}" hx-trigger="every 5s"' in body and "transition-form" in body
    assert "HX-Request" in page["Vary"]
    partial = client.get(url, **HX).content.decode()
    assert "<html" not in partial and "transition-form" not in partial  # a typed reason is never swapped away
    assert 'data-testid="incident-state" role="status">isolated<' in partial
    assert '<div id="incident-side" hx-swap-oob="true">' in partial  # workloads and tenants follow, out of band
    # The state changes server-side: the next poll shows it.
    Incident.objects.filter(pk=faulted.pk).update(state="draining")
    assert 'role="status">draining<' in client.get(url, **HX).content.decode()
    client.post(
        reverse("health:incident_transition", args=[faulted.pk]), {"to": "false-positive", "reason": "bad sensor"}
    )
    closed = client.get(url, **HX).content.decode()
    assert "false-positive" in closed and "hx-trigger" not in closed  # closed: polling stops


def test_node_health_page_polls_status_operation_and_incidents(faulted, personas, client):
    client.force_login(fresh(personas.oncall))
    url = reverse("health:node_health", args=[faulted.node_id])
    assert f'id="node-status" hx-get="{url}" hx-trigger="every 15s"' in client.get(url).content.decode()
    client.post(reverse("health:node_action", args=[faulted.node_id]), {"action": "drain", "reason": "reboot"})
    partial = client.get(url, **HX).content.decode()
    assert "<html" not in partial and "plotly" not in partial
    assert 'hx-trigger="every 3s"' in partial  # an operation runs: faster
    assert 'data-testid="running-operation"' in partial and 'role="progressbar"' in partial
    assert '<div id="node-incidents" hx-swap-oob="true">' in partial and faulted.title in partial


def test_drain_preview_names_its_impact_in_one_line(fleet, personas, client, django_capture_on_commit_callbacks):
    from apps.fleet.models import Node
    from apps.fleet.services import sync_inventory
    from apps.workloads.services import reconcile_workloads, submit_workload
    from tests.health.conftest import training_spec

    with django_capture_on_commit_callbacks(execute=True):
        workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=training_spec(workers=4))
    reconcile_workloads()
    assert sync_inventory(fleet["cluster"].pk).ok
    workload.refresh_from_db()
    node = Node.objects.get(name=workload.placements[0]["node"])
    client.force_login(fresh(personas.oncall))
    url = reverse("health:node_health", args=[node.pk])
    page = client.get(url, {"preview": "drain", "reason": "reboot"}).content.decode()
    assert f"Drain {node.name}: evicts 1 workload of tenant a." in page
    cordon = client.get(url, {"preview": "cordon", "reason": "x"}).content.decode()
    assert f"Cordon {node.name}: evicts nothing." in cordon
