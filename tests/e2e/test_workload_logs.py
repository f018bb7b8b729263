"""A member in the browser: a running simulated training job's Logs page tails its log live (fetch + ReadableStream
over GET /api/v1/workloads/{id}/logs/, static/js/workload_logs.js), every worker's lines prefixed, then one worker's."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from apps.fleet.models import GpuModel
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.tenancy import services as tenancy
from apps.workloads import services as workloads
from apps.workloads.models import Workload
from tests.e2e.browser import PageProblems, log_in, screenshot
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec

pytestmark = pytest.mark.e2e

LINES = "#log-lines span"


@pytest.fixture
def running(personas_live) -> Workload:
    personas = personas_live
    admin = fresh(personas.platform_admin)
    cluster = create_simulated_cluster(
        None, "sim-logs", {"nodes": 2, "gpus_per_node": 8, "models": {"h100": 1}, "seed": 3}
    )
    assert sync_inventory(cluster.pk).ok
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=16)
    queue = tenancy.create_queue(admin, tenant=personas.a, name="train")
    tenancy.bind_queue(admin, queue, cluster=cluster, namespaces=["a-train"])
    tenancy.set_quota(admin, queue=queue, gpu_model=h100, guaranteed=16)
    created, _ = workloads.submit_workload(
        fresh(personas.member_a),
        kind="training",
        spec=training_spec(name="tail-me", workers=2, gpus_per_worker=4, max_runtime_s=3600),
    )
    workloads.reconcile_workloads()
    workload = Workload.objects.get(pk=created.pk)
    assert workload.state == "running", workload.state_reason
    return workload


def test_the_logs_page_tails_a_running_job_live(page: Page, problems: PageProblems, running):
    log_in(page, "member-a")
    page.goto(f"/workloads/{running.pk}/")
    page.get_by_test_id("workload-logs-link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Logs · {running.name}")
    lines = page.get_by_test_id("log-lines")
    expect(page.get_by_label("Follow")).to_be_checked()
    expect(page.get_by_test_id("log-status")).to_have_text("Following the log as it is written…")
    expect(lines).to_contain_text("submitted: 2 × 4 GPUs")
    expect(lines).to_contain_text("[worker 1] ")
    # The simulated program prints a step every 3 s: lines keep arriving on the open answer, no reload.
    shown = page.locator(LINES).count()
    page.wait_for_function("n => document.querySelectorAll('#log-lines span').length >= n + 2", arg=shown)
    expect(lines).to_contain_text("step ")
    assert page.evaluate(
        "() => { const p = document.getElementById('log-lines'); "
        "return p.scrollHeight - p.scrollTop - p.clientHeight < 24; }"
    )  # the end stays in view
    problems.assert_clean("the live tail")
    screenshot(page, "workload-logs")

    page.get_by_label("Worker").select_option("1")
    expect(lines).not_to_contain_text("[worker")
    expect(lines).to_contain_text("worker 1 started on")
    expect(lines).to_contain_text("rank 1")
    expect(lines).not_to_contain_text("rank 0")
    shown = page.locator(LINES).count()
    page.wait_for_function("n => document.querySelectorAll('#log-lines span').length > n", arg=shown)

    page.get_by_label("Follow").uncheck()  # a plain read: the last lines, then the answer ends
    expect(page.get_by_test_id("log-status")).to_have_text("The log ends here.")
    expect(lines).to_contain_text("rank 1")


def test_a_bad_choice_is_said_in_words_not_thrown(page: Page, problems: PageProblems, running):
    log_in(page, "member-a")
    page.goto(f"/workloads/{running.pk}/logs/")
    expect(page.get_by_test_id("log-lines")).to_contain_text("submitted")
    problems.reset()
    page.evaluate(
        "() => { const s = document.getElementById('log-worker'); s.add(new Option('7', '7')); "
        "s.value = '7'; s.dispatchEvent(new Event('change')); }"
    )
    status = page.get_by_test_id("log-status")
    expect(status).to_contain_text("worker: tail-me has workers 0 to 1.")
    expect(status).to_have_attribute("data-state", "problem")
    assert not problems.page_errors  # (the console notes the 400 itself: the browser's, not the page's)
