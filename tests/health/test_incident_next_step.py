"""The incident page says what to do next and resumes the node itself; operation pages lead back to the node and
the incidents they moved."""

import pytest
from django.urls import reverse

from apps.fleet.models import Node
from apps.health.models import Incident
from apps.operations.models import Operation
from tests.health.conftest import cycle, inject
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def isolated(fleet, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    cycle(cluster)
    inject(cluster, "gpu-0002", "xid79", 1)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)  # automation cordons the node
    incident = Incident.objects.get(cause="xid-79")
    assert incident.state == "isolated"
    return incident


def test_next_step_follows_the_incident_and_resume_runs_from_its_page(
    isolated, personas, client, django_capture_on_commit_callbacks
):
    client.force_login(fresh(personas.oncall))
    url = reverse("health:incident_detail", args=[isolated.pk])
    node_health = reverse("health:node_health", args=[isolated.node_id])
    page = client.get(url).content.decode()
    assert 'data-testid="next-step"' in page and f"{node_health}?preview=drain" in page
    assert 'data-testid="resume-form"' not in page

    client.post(reverse("health:incident_transition", args=[isolated.pk]), {"to": "validating", "reason": "reset"})
    page = client.get(url).content.decode()
    assert 'data-testid="resume-form"' in page and "Resume the node" in page

    # No reason: refused, back on the incident page, nothing started.
    action = reverse("health:node_action", args=[isolated.node_id])
    refused = client.post(action, {"action": "resume", "reason": "", "incident": isolated.pk})
    assert refused.status_code == 302 and refused.url == url
    assert not Operation.objects.filter(kind="health.resume").exists()

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(action, {"action": "resume", "reason": "validated", "incident": isolated.pk})
    operation = Operation.objects.get(kind="health.resume")
    assert response.url == reverse("operations:operation_detail", args=[operation.pk])
    assert operation.params["incident_id"] == isolated.pk and operation.reason == "validated"
    assert operation.status == "succeeded" and operation.result["incidents"] == [isolated.pk]
    assert Incident.objects.get(pk=isolated.pk).state == "resolved"
    assert not Node.objects.get(pk=isolated.node_id).unschedulable

    detail = client.get(response.url).content.decode()
    assert 'data-testid="operation-links"' in detail
    assert f'href="{node_health}"' in detail and f'href="{url}"' in detail
    assert f"Incident #{isolated.pk}" in detail
    assert 'data-testid="next-step"' not in client.get(url).content.decode()  # resolved: nothing left to do


def test_an_incident_of_another_node_is_not_attached(
    isolated, fleet, personas, client, django_capture_on_commit_callbacks
):
    other = next(n for n in fleet["nodes"] if n.pk != isolated.node_id)
    client.force_login(fresh(personas.oncall))
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("health:node_action", args=[other.pk]), {"action": "cordon", "reason": "x", "incident": isolated.pk}
        )
    operation = Operation.objects.get(kind="health.cordon", target_id=str(other.pk))
    assert operation.params["incident_id"] is None


def test_the_automatic_cordon_links_its_incident(isolated, personas, client):
    operation = Operation.objects.get(kind="health.cordon")
    client.force_login(fresh(personas.oncall))
    page = client.get(reverse("operations:operation_detail", args=[operation.pk])).content.decode()
    assert page.count(reverse("health:incident_detail", args=[isolated.pk])) == 1  # params and result: one link
    assert "GPU health and runbook actions" in page


def test_a_cluster_operation_links_its_cluster(fleet, personas, client):
    operation = Operation.objects.create(
        kind="fleet.sync", target_type="fleet.cluster", target_id=str(fleet["cluster"].pk), target_label="hsim"
    )
    client.force_login(fresh(personas.platform_admin))
    page = client.get(reverse("operations:operation_detail", args=[operation.pk])).content.decode()
    assert f'href="{reverse("fleet:cluster_detail", args=["hsim"])}"' in page and "Cluster hsim" in page
