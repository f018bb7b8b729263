"""On-call in the browser: an XID 79 becomes an incident and a cordoned node; preview and run a drain."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from apps.backends.simulator.services import create_simulated_cluster, inject_fault
from apps.fleet.services import sync_inventory
from apps.health.ingest import run_cycle
from apps.health.models import Incident, NodeHealth
from tests.e2e.browser import PageProblems, log_in, screenshot

pytestmark = pytest.mark.e2e


@pytest.fixture
def faulted(personas_live):
    cluster = create_simulated_cluster(
        None, "sim-hx", {"nodes": 4, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 4}
    )
    assert sync_inventory(cluster.pk).ok
    run_cycle(cluster.pk)
    health = NodeHealth.objects.filter(node__cluster=cluster)
    health.update(
        acc_minute=health.first().acc_minute - timedelta(minutes=1),
        scraped_at=health.first().scraped_at - timedelta(seconds=15),
    )
    run_cycle(cluster.pk)  # the minute turned: sparklines have a point
    inject_fault(None, cluster, "gpu-0002", "xid79", 4, reason="game day")
    run_cycle(cluster.pk)  # tasks run eagerly here: the cordon operation runs at once
    return Incident.objects.get(cause="xid-79")


def test_oncall_follows_an_xid79_and_drains_the_node(page: Page, problems: PageProblems, faulted):
    log_in(page, "oncall")
    page.goto("/health/")
    expect(page.get_by_test_id("incidents-by-severity").locator("tr", has_text="fatal")).to_contain_text("1")
    expect(page.get_by_test_id("incident-table")).to_contain_text("sim-hx/gpu-0002")
    screenshot(page, "health-fleet")
    problems.assert_clean("fleet health")

    page.get_by_test_id("incident-table").get_by_role("link", name=re.compile("Fatal XID")).click()
    expect(page.get_by_test_id("incident-state")).to_have_text("isolated")
    expect(page.get_by_test_id("evidence")).to_contain_text("DCGM_FI_DEV_XID_ERRORS = 79 on GPU 4")
    expect(page.get_by_test_id("timeline")).to_contain_text("automation started health.cordon")
    screenshot(page, "health-incident")

    page.get_by_role("link", name="sim-hx/gpu-0002").click()
    expect(page.get_by_test_id("node-schedulable")).to_have_text("cordoned")
    expect(page.locator(".spark svg").first).to_be_visible()  # plotly drew the sparklines
    form = page.get_by_test_id("preview-form")
    form.get_by_label("Action").select_option("drain")
    form.get_by_label("Reason (required to run)").fill("reboot after XID 79")
    form.get_by_role("button", name="Preview impact").click()
    expect(page.get_by_test_id("impact")).to_contain_text("Impact of drain")
    screenshot(page, "health-node-preview")
    page.get_by_test_id("run-action").click()
    expect(page).to_have_url(re.compile(r"/operations/\d+/$"))
    expect(page.get_by_test_id("operation-status")).to_have_text("succeeded")
    page.goto(f"/health/incidents/{faulted.pk}/")
    expect(page.get_by_test_id("incident-state")).to_have_text("drained")
    problems.assert_clean("drain journey")
