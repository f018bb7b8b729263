"""On-call in the browser: the fleet of a simulated cluster, a node's live telemetry, an injected XID 79."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from apps.backends.simulator.services import create_simulated_cluster
from apps.fleet.services import sync_inventory
from tests.e2e.browser import PageProblems, log_in, screenshot

pytestmark = pytest.mark.e2e


@pytest.fixture
def sim_cluster(personas_live):
    cluster = create_simulated_cluster(
        None, "sim-e2e", {"nodes": 4, "gpus_per_node": 8, "models": {"h100": 0.5, "a100": 0.5}, "seed": 11}
    )
    assert sync_inventory(cluster.pk).ok
    return cluster


def test_oncall_sees_the_fleet_and_a_fault(page: Page, problems: PageProblems, sim_cluster):
    log_in(page, "oncall")
    page.goto("/fleet/")
    expect(page.locator("main table").first).to_contain_text("sim-e2e")
    capacity = page.get_by_test_id("capacity-table")
    expect(capacity.locator("tr", has_text="H100-80GB-HBM3")).to_contain_text("2 × 8 GPUs within one leaf switch")
    screenshot(page, "fleet-clusters")

    page.get_by_role("link", name="Nodes").click()
    expect(page.locator("main table tbody tr")).to_have_count(4)
    page.get_by_role("link", name="gpu-0001").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("gpu-0001")
    telemetry = page.get_by_test_id("telemetry-table")  # loaded by htmx from the node's simulated exporter
    expect(telemetry.locator("tbody tr")).to_have_count(8)
    expect(telemetry).to_contain_text("°C")
    problems.assert_clean("node page")

    form = page.get_by_test_id("fault-form")
    form.get_by_label("Fault").select_option("xid79")
    form.get_by_label("GPU (empty: the whole node)").select_option("2")
    form.get_by_label("Reason").fill("game day")
    form.get_by_role("button", name="Inject fault").click()
    expect(page.get_by_role("alert").filter(has_text="Injected xid79 on gpu-0001/gpu2")).to_be_visible()
    expect(page.get_by_test_id("fault-list")).to_contain_text("active")
    expect(page.get_by_test_id("telemetry-table").locator("tr", has_text="XID 79")).to_have_count(1)

    # Sync now: an operation that runs on commit; its page shows it succeeded, and the node shows the broken GPU.
    page.goto("/fleet/clusters/sim-e2e/")
    page.get_by_role("button", name="Sync now").click()
    expect(page).to_have_url(re.compile(r"/operations/\d+/$"))
    expect(page.get_by_test_id("operation-status")).to_have_text("succeeded")
    page.goto("/fleet/clusters/sim-e2e/nodes/gpu-0001/")
    gpu2 = page.get_by_test_id("gpu-table").locator("tbody tr").nth(2)
    expect(gpu2).to_contain_text("unhealthy")
    screenshot(page, "fleet-node-xid79")
    problems.assert_clean("fault journey")
