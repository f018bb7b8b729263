"""Journey of an on-call engineer: an XID 79 on a busy node, from the fault to the node back in service.

The fleet, a job on it and DCGM scrapes are the outside world (services and the health cycle, called by the
test as beat would); the engineer works in the browser only: the fleet and the node's live telemetry, the
fault injected on the simulated node, the incident, the drain's impact preview and the drain itself, the
repair (the fault cleared), validation and the resume from the incident page, each with a reason.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from apps.audit.models import AuditEvent
from apps.health.models import Incident
from apps.workloads import services as workloads
from tests.e2e import world
from tests.e2e.browser import PageProblems, log_in, main_nav, screenshot
from tests.utils.personas import fresh

pytestmark = pytest.mark.e2e


@pytest.fixture
def busy_fleet(personas_live):
    cluster = world.h100_cluster("sim-oncall", nodes=4, seed=4)
    world.team_with_quota(personas_live, cluster, guaranteed=8)
    jobs = [
        workloads.submit_workload(
            fresh(personas_live.member_a), kind="training", spec=world.training_spec(name, gpus=4, runtime_s=4 * 3600)
        )[0]
        for name in ("llm-sft", "llm-eval")
    ]
    workloads.reconcile_workloads()  # beat's loop learns where they were placed
    for job in jobs:
        job.refresh_from_db()
        assert job.state == "running" and job.placements, job.state_reason
    sft, evaluation = jobs
    node = sft.placements[0]["node"]
    assert evaluation.placements[0]["node"] == node  # packed on one node: GPUs 0-3 and 4-7
    world.sync(cluster)  # the next inventory sync shows their GPUs in use
    world.scrape_a_minute_of_history(cluster)
    return {"cluster": cluster, "node": node, "faulty_gpu": sft.placements[0]["gpus"][0]}


def test_oncall_isolates_drains_and_resumes_a_node_after_xid79(page: Page, problems: PageProblems, busy_fleet):
    cluster, node, gpu = busy_fleet["cluster"], busy_fleet["node"], busy_fleet["faulty_gpu"]
    log_in(page, "oncall")
    screenshot(page, "overview", docs=True)

    # The fleet and the busy node with its live telemetry.
    main_nav(page, "Fleet")
    expect(page.locator("main table").first).to_contain_text("sim-oncall")
    h100 = page.get_by_test_id("capacity-table").locator("tr", has_text="H100-80GB-HBM3").locator("td")
    expect(h100.nth(1)).to_have_text("4")  # nodes
    expect(h100.nth(3)).to_have_text("8")  # GPUs allocated: the two jobs
    page.get_by_role("link", name="Nodes", exact=True).click()
    expect(page.locator("main table tbody tr")).to_have_count(4)
    screenshot(page, "fleet-nodes", docs=True)
    page.get_by_role("link", name=node, exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(node)
    telemetry = page.get_by_test_id("telemetry-table")  # loaded by htmx from the node's simulated exporter
    expect(telemetry.locator("tbody tr")).to_have_count(8)
    expect(telemetry).to_contain_text("°C")
    expect(page.get_by_test_id("gpu-table")).to_contain_text("llm-sft")
    expect(page.get_by_test_id("gpu-table")).to_contain_text("llm-eval")
    screenshot(page, "node-detail", docs=True)
    problems.assert_clean("node page")

    # The fault: XID 79 on a GPU of llm-sft (the simulated node's fault form stands in for the hardware).
    form = page.get_by_test_id("fault-form")
    form.get_by_label("Fault").select_option("xid79")
    form.get_by_label("GPU (empty: the whole node)").select_option(str(gpu))
    form.get_by_label("Reason").fill("game day")
    form.get_by_role("button", name="Inject fault").click()
    expect(page.get_by_role("alert").filter(has_text=f"Injected xid79 on {node}/gpu{gpu}")).to_be_visible()
    world.scrape(cluster)  # the next DCGM scrape finds it: an incident, and automation cordons the node

    # The incident: found from the health page, isolated automatically, with its evidence and affected work.
    main_nav(page, "Health")
    expect(page.get_by_test_id("incidents-by-severity").locator("tr", has_text="fatal")).to_contain_text("1")
    incidents = page.get_by_test_id("incident-table")
    expect(incidents).to_contain_text(f"sim-oncall/{node}")
    incidents.get_by_role("link", name=re.compile("Fatal XID")).click()
    incident = Incident.objects.get(cause="xid-79")
    expect(page).to_have_url(re.compile(rf"/health/incidents/{incident.pk}/$"))
    expect(page.get_by_test_id("incident-state")).to_have_text("isolated")
    expect(page.get_by_test_id("evidence")).to_contain_text(f"DCGM_FI_DEV_XID_ERRORS = 79 on GPU {gpu}")
    expect(page.get_by_test_id("timeline")).to_contain_text("automation started health.cordon")
    expect(page.get_by_test_id("workloads")).to_contain_text("llm-sft")
    screenshot(page, "incident-detail", docs=True)
    problems.assert_clean("incident page")

    # The drain: its impact first (the job to be evicted, the tenant dropping below its guarantee), then run.
    page.get_by_test_id("next-step").get_by_role("link", name="Preview a drain").click()
    expect(page.get_by_test_id("node-schedulable")).to_have_text("cordoned")
    expect(page.locator(".spark svg").first).to_be_visible()  # plotly drew the telemetry sparklines
    impact = page.get_by_test_id("impact")
    expect(impact).to_contain_text("Impact of drain")
    expect(impact).to_contain_text("a/llm-eval (training, 4 GPUs)")
    impact.get_by_placeholder("Reason").fill(f"XID 79: reboot and reset GPU {gpu}")
    screenshot(page, "node-health-drain-preview")
    page.get_by_test_id("run-action").click()
    expect(page).to_have_url(re.compile(r"/operations/\d+/$"))
    expect(page.get_by_test_id("operation-status")).to_have_text("succeeded")
    expect(page.get_by_role("progressbar", name="Progress")).to_have_attribute("aria-valuenow", "100")
    expect(page.locator("pre.log")).to_contain_text(f"drained {node}")
    screenshot(page, "operation-drain")
    page.get_by_test_id("operation-links").get_by_role("link", name=f"Incident #{incident.pk}").click()
    expect(page.get_by_test_id("incident-state")).to_have_text("drained")
    problems.assert_clean("the drain")

    # The repair: the GPU is reset (the simulated fault cleared), the next scrape is clean, on-call validates.
    page.get_by_role("link", name=f"sim-oncall/{node}").click()
    page.wait_for_load_state("load")  # the node's health page loads plotly: leaving earlier would abort it
    page.get_by_role("link", name="fleet view").click()
    page.get_by_test_id("fault-list").get_by_role("button", name="clear").click()
    expect(page.get_by_role("alert").filter(has_text="Cleared")).to_be_visible()
    expect(page.get_by_test_id("fault-list")).to_contain_text("cleared")
    world.scrape(cluster)
    page.get_by_test_id("health-link").click()
    page.wait_for_load_state("load")
    page.get_by_test_id("incident-table").get_by_role("link", name=re.compile("Fatal XID")).click()
    transition = page.get_by_test_id("transition-form")
    transition.get_by_label("Move to").select_option("validating")
    transition.get_by_label("Reason (required)").fill(f"GPU {gpu} reset, dcgmi diag -r 3 passed")
    transition.get_by_role("button", name="Move").click()
    expect(page.get_by_role("alert").filter(has_text=f"Incident #{incident.pk} is now validating")).to_be_visible()
    expect(page.get_by_test_id("incident-state")).to_have_text("validating")

    # The resume, from the incident page, with a reason: the node is back and the incident resolved.
    resume = page.get_by_test_id("resume-form")
    resume.get_by_label("Reason (required)").fill("validated after the reset")
    resume.get_by_role("button", name="Resume the node").click()
    expect(page).to_have_url(re.compile(r"/operations/\d+/$"))
    expect(page.get_by_test_id("operation-status")).to_have_text("succeeded")
    expect(page.locator("pre.log")).to_contain_text(f"resumed {node}")
    page.get_by_test_id("operation-links").get_by_role("link", name=f"Incident #{incident.pk}").click()
    expect(page.get_by_test_id("incident-state")).to_have_text("resolved")
    expect(page.get_by_test_id("timeline")).to_contain_text("validated after the reset")
    expect(page.get_by_test_id("next-step")).to_have_count(0)
    page.get_by_role("link", name=f"sim-oncall/{node}").click()
    expect(page.get_by_test_id("node-schedulable")).to_have_text("schedulable")
    problems.assert_clean("the resume")

    started = AuditEvent.objects.get(action="operation.start", reason="validated after the reset")
    assert (started.actor_label, started.after["kind"]) == ("oncall", "health.resume")
    assert started.after["params"]["incident_id"] == incident.pk
