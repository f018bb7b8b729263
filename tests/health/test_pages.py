"""The health pages render what on-call needs and their forms call the same services as the API."""

import pytest
from django.urls import reverse

from apps.fleet.models import Node
from apps.health.models import Incident, RuleSet
from apps.operations.models import Operation
from tests.health.conftest import cycle, inject
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def faulted(fleet, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    cycle(cluster)
    cycle(cluster)
    inject(cluster, "gpu-0003", "xid79", 5)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    return Incident.objects.get(cause="xid-79")


def test_fleet_health(faulted, personas, client):
    client.force_login(fresh(personas.oncall))
    page = client.get(reverse("health:fleet_health")).content.decode()
    assert "GPUs by health" in page and "Open incidents by severity" in page and "isolation budget" in page
    assert faulted.title in page and "hsim/gpu-0003" in page
    assert ">1 / 1<" in page  # the pool's budget (10 % of 4 nodes → 1) is used


def test_node_health_with_sparklines_and_preview(faulted, personas, client):
    client.force_login(fresh(personas.oncall))
    url = reverse("health:node_health", args=[faulted.node_id])
    page = client.get(url).content.decode()
    assert "vendor/plotly/plotly-cartesian.min.js" in page and 'class="spark ms-auto"' in page
    assert "xid-fatal" in page and "cordoned" in page and "isolated by automation" in page
    preview = client.get(url, {"preview": "drain", "reason": "reboot"}).content.decode()
    assert "Impact of drain" in preview and "Run drain" in preview
    response = client.post(
        reverse("health:node_action", args=[faulted.node_id]), {"action": "drain", "reason": "reboot"}
    )
    operation = Operation.objects.get(kind="health.drain")
    assert response.status_code == 302 and response.url == reverse("operations:operation_detail", args=[operation.pk])
    again = client.post(reverse("health:node_action", args=[faulted.node_id]), {"action": "cordon", "reason": "x"})
    assert again.url == reverse("operations:operation_detail", args=[operation.pk])  # the running one, not a new one
    assert "Running now" in client.get(url).content.decode()


def test_incident_board_detail_and_transition(faulted, personas, client):
    client.force_login(fresh(personas.oncall))
    board = client.get(reverse("health:incident_list"), {"open": "true"}).content.decode()
    assert faulted.title in board
    detail = client.get(reverse("health:incident_detail", args=[faulted.pk])).content.decode()
    assert "DCGM_FI_DEV_XID_ERRORS = 79 on GPU 5" in detail and "transition-form" in detail
    client.post(
        reverse("health:incident_transition", args=[faulted.pk]), {"to": "repairing", "reason": "RMA ticket 42"}
    )
    assert Incident.objects.get(pk=faulted.pk).state == "repairing"


def test_members_see_no_runbook_forms(faulted, personas, client):
    client.force_login(fresh(personas.member_a))
    page = client.get(reverse("health:node_health", args=[faulted.node_id])).content.decode()
    assert "preview-form" not in page
    client.post(reverse("health:node_action", args=[faulted.node_id]), {"action": "resume", "reason": "mine"})
    assert not Operation.objects.filter(kind="health.resume").exists()
    assert Node.objects.get(pk=faulted.node_id).unschedulable


def test_rule_editor(fleet, personas, client):
    client.force_login(fresh(personas.platform_admin))
    page = client.get(reverse("health:rules")).content.decode()
    assert "nvlink-crc" in page and "version 1" in page
    bad = client.post(
        reverse("health:rules"),
        {"key": "nvlink-crc", "severity": "critical", "action": "cordon", "enabled": "on", "params": '{"per": "hour"}'},
    )
    assert bad.status_code == 200 and "Invalid rule nvlink-crc" in bad.content.decode()
    params = '{"metrics": ["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"], "per": "second", "op": ">=", "value": 50}'
    ok = client.post(
        reverse("health:rules"),
        {
            "key": "nvlink-crc",
            "severity": "critical",
            "action": "cordon",
            "enabled": "on",
            "params": params,
            "reason": "new links",
        },
    )
    assert ok.status_code == 302 and RuleSet.objects.count() == 2
    assert RuleSet.objects.get(version=2).rules.get(key="nvlink-crc").params["value"] == 50


def test_fleet_health_queries_do_not_grow_with_pools_or_nodes(fleet, personas, client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.fleet.services import create_simulated_cluster, sync_inventory

    client.force_login(fresh(personas.oncall))
    cycle(fleet["cluster"])

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("health:fleet_health")).status_code == 200
        return len(queries)

    count()  # the process's first request fills its caches (translations, reference rows): not the page's cost
    small = count()
    more = create_simulated_cluster(
        None, "more", {"nodes": 12, "models": {"h100": 0.4, "a100": 0.3, "l40s": 0.3}, "seed": 3}
    )
    assert sync_inventory(more.pk).ok
    cycle(more)
    assert count() == small
