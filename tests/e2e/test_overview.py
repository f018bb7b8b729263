"""The overview in the browser: every panel shows, plotly draws the heatmap offline, a node's column opens it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.health.ingest import run_cycle
from tests.e2e.browser import PageProblems, log_in, screenshot

pytestmark = pytest.mark.e2e


@pytest.fixture
def watched_fleet(personas_live):
    cluster = create_simulated_cluster(
        None, "sim-ov", {"nodes": 4, "gpus_per_node": 8, "models": {"h100": 0.5, "a100": 0.5}, "seed": 5}
    )
    assert sync_inventory(cluster.pk).ok
    assert run_cycle(cluster.pk).nodes == 4  # one telemetry cycle: the heatmap has readings
    return cluster


def test_the_overview_draws_every_panel(page: Page, problems: PageProblems, watched_fleet):
    log_in(page, "root")
    problems.assert_clean("log-in")
    for panel in (
        "overview-kpis",
        "overview-gpus-by-state",
        "overview-fragmentation",
        "overview-incidents",
        "overview-isolation",
        "overview-heatmap",
        "overview-demand",
        "overview-spend",
    ):
        expect(page.get_by_test_id(panel)).to_be_visible()
    states = page.get_by_test_id("overview-gpus-by-state")
    expect(states.locator('tr[data-model="H100-80GB-HBM3"] [data-state="free"]')).to_have_text("16")
    expect(page.get_by_test_id("overview-fragmentation")).to_contain_text("2 × 8 GPUs")
    heatmap = page.locator("#overview-heatmap")
    expect(heatmap.locator(".main-svg").first).to_be_visible()  # the vendored plotly drew it, offline
    expect(heatmap.locator(".hm image, .heatmaplayer image").first).to_be_attached()
    expect(heatmap).to_contain_text("sim-ov")  # the cluster's name above its columns
    page.wait_for_load_state("networkidle")
    screenshot(page, "overview-fleet")
    problems.assert_clean("the overview")

    box = heatmap.locator(".nsewdrag").first.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.1, box["y"] + box["height"] * 0.1)  # node 1, GPU 0
    expect(heatmap.locator(".hoverlayer")).to_contain_text("sim-ov · gpu-0001")
    page.mouse.click(box["x"] + box["width"] * 0.1, box["y"] + box["height"] * 0.1)
    expect(page).to_have_url(re.compile(r"/health/nodes/\d+/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("gpu-0001")
    problems.assert_clean("the node's health page")


def test_a_member_sees_their_own_rows_only(page: Page, problems: PageProblems, watched_fleet):
    log_in(page, "member-b")
    expect(page.get_by_test_id("overview-scope")).to_contain_text("allocation and spend of your tenants only")
    expect(page.get_by_test_id("overview-heatmap")).to_be_visible()
    expect(page.locator("main")).not_to_contain_text("Org A")
    problems.assert_clean("the member's overview")


def test_the_language_switcher_turns_the_console_chinese(page: Page, problems: PageProblems, watched_fleet):
    log_in(page, "root")
    page.get_by_test_id("language-switcher").get_by_role("combobox").select_option("zh-hans")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    expect(page.get_by_role("heading", level=1)).to_contain_text("root")
    nav = page.locator("nav.navbar")
    expect(nav).to_contain_text("租户")
    expect(page.get_by_test_id("overview-gpus-by-state")).to_contain_text("已分配")
    expect(page.locator("#overview-heatmap .main-svg").first).to_be_visible()
    screenshot(page, "overview-zh", docs=True)
    nav.get_by_role("link", name="负载", exact=True).click()
    expect(page).to_have_url(re.compile(r"/workloads/"))
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")  # the choice sticks (a cookie)
    problems.assert_clean("the console in Chinese")
