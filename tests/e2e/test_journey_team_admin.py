"""Journey of a team admin: quota and spend, a request for more, a job from a template watched live, its cost.

Only the world around the console is set up through services (a simulated cluster, Org A's queue on it,
a saved template) and advanced by the test (simulated time, beat's metering and workloads loop); every
step of the team admin is a click or a form in the browser.
"""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from playwright.sync_api import Page, expect

from apps.chargeback.budgets import spend_of
from apps.chargeback.reports import workload_cost
from apps.tenancy.models import QuotaRequest
from apps.workloads import services as workloads
from apps.workloads.models import Workload
from tests.e2e import world
from tests.e2e.browser import PageProblems, log_in, main_nav, screenshot
from tests.utils.personas import fresh
from tests.utils.simulator import runs_to_the_end

pytestmark = pytest.mark.e2e


@pytest.fixture
def team(personas_live):
    cluster = world.h100_cluster("sim-team", nodes=2, seed=3)
    setup = world.team_with_quota(personas_live, cluster, guaranteed=8)
    template = workloads.save_template(
        fresh(personas_live.tenant_admin_a),
        tenant=personas_live.a,
        name="smoke-8xh100",
        kind="training",
        spec={k: v for k, v in world.training_spec("smoke").items() if k != "tenant"},
        description="One node of H100 for 30 minutes: the nightly smoke run.",
    )
    return {**vars(setup), "template": template, "personas": personas_live}


def test_team_admin_requests_quota_and_runs_a_job_from_a_template(page: Page, problems: PageProblems, team):
    log_in(page, "ta-a")

    # Quota and spend on the tenant page.
    main_nav(page, "Tenants")
    page.get_by_role("link", name="Org A", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Org A")
    totals = page.get_by_test_id("quota-totals")
    expect(totals.locator("tbody tr")).to_have_count(1)
    expect(totals.locator("tbody tr").first).to_contain_text("H100")
    expect(totals.locator("tbody td").nth(1)).to_have_text("8")  # guaranteed
    expect(page.get_by_test_id("tenant-spend").get_by_test_id("cost-to-date")).to_have_text("0.00")
    screenshot(page, "tenant-detail", docs=True)
    problems.assert_clean("tenant page")

    # More quota: the queue's row leads to the request form with the queue and the model chosen.
    page.get_by_test_id("queue-quotas").get_by_role("link", name="request more").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Quota requests")
    form = page.locator("form", has=page.get_by_role("button", name="File request"))
    expect(form.get_by_role("combobox", name="Queue")).to_have_value(str(team["queue"].pk))
    expect(form.get_by_role("combobox", name="GPU model")).to_have_value("h100")
    form.get_by_role("spinbutton", name="Guaranteed").fill("16")
    form.get_by_role("textbox", name="Justification").fill("Two nodes for the 8B pre-training run.")
    form.get_by_role("button", name="File request").click()
    expect(page.get_by_role("alert").filter(has_text="Request filed")).to_be_visible()
    filed = page.get_by_test_id("quota-requests").locator("tbody tr", has_text="16 × h100")
    expect(filed).to_contain_text("Pending")
    expect(filed).to_contain_text("ta-a")
    screenshot(page, "quota-request-filed")
    assert QuotaRequest.objects.get().justification == "Two nodes for the 8B pre-training run."

    # A job from the team's template: it fills the submit form, and the previews say what would happen.
    main_nav(page, "Workloads")
    page.get_by_role("link", name="Submit", exact=True).click()
    page.wait_for_load_state("load")  # choosing a template reloads the page: leaving earlier would abort submit.js
    page.get_by_test_id("template-picker").get_by_role("combobox").select_option(label="a/smoke-8xh100 v1 (training)")
    expect(page.get_by_test_id("template-card")).to_contain_text("filled from template a/smoke-8xh100, version 1")
    form = page.get_by_test_id("submit-form")
    expect(form.get_by_label("GPUs per worker", exact=True)).to_have_value("8")
    form.get_by_label("Name", exact=True).fill("smoke-nightly")
    expect(page.get_by_test_id("preview-admission").get_by_test_id("admission-headline")).to_have_text(
        "Would start now, within guarantee."
    )
    expect(page.get_by_test_id("preview-cost").get_by_test_id("cost-runtime")).to_contain_text("10.00 USD")
    expect(page.get_by_test_id("preview-rendering").get_by_test_id("rendering-validation")).to_contain_text("passed")
    screenshot(page, "submit-from-template", docs=True)
    form.get_by_role("button", name="Submit").click()

    expect(page.get_by_role("alert").filter(has_text="Submitted smoke-nightly")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_contain_text("smoke-nightly")
    workload = Workload.objects.get(name="smoke-nightly")
    runs_to_the_end(workload)
    expect(page).to_have_url(re.compile(rf"/workloads/{workload.pk}/$"))
    state = page.get_by_test_id("workload-state")
    expect(state).to_have_text("running")
    expect(page.get_by_test_id("cancel-form")).to_be_visible()
    expect(page.get_by_test_id("workload-cost")).to_contain_text("nothing metered yet")
    problems.assert_clean("submission")

    # Watching it run: the status block polls the server, the page is never reloaded (the marker survives).
    page.evaluate("window.journeyMarker = 'still the same page'")
    world.time_passes(team["cluster"], 10)
    expect(page.get_by_test_id("cost-amount")).to_have_text(re.compile(r"^\d+\.\d\d USD$"))
    expect(state).to_have_text("running")
    world.time_passes(team["cluster"], 25)  # past its 30 minutes: it finished, and all of it is metered
    expect(state).to_have_text("succeeded")
    # 8 GPUs × 0.5 h × 2.50 USD.
    expect(page.get_by_test_id("cost-amount")).to_have_text("10.00 USD")
    expect(page.get_by_test_id("workload-cost")).to_contain_text("for 4.00 GPU-hours metered")
    expect(page.get_by_test_id("workload-events")).to_contain_text("running → succeeded")
    assert page.evaluate("window.journeyMarker") == "still the same page"
    expect(page.locator("#workload-status[hx-get]")).to_have_count(0)  # finished: it stopped polling
    expect(page.get_by_test_id("cancel-form")).to_have_count(0)  # and the header lost its Cancel button
    screenshot(page, "workload-detail", docs=True)
    problems.assert_clean("the running workload")

    # The tenant's spend this month includes it (the part of the run that fell in this month).
    page.get_by_test_id("workload-cost").get_by_role("link", name="a's spend this month").click()
    this_month = spend_of(team["personas"].a).cost_to_date
    assert workload_cost(workload.pk).total == Decimal("10.00")
    assert this_month > 0
    expect(page.get_by_test_id("tenant-spend").get_by_test_id("cost-to-date")).to_have_text(f"{this_month}")
    expect(page.get_by_test_id("quota-totals").locator("tbody td").nth(2)).to_have_text("0")  # used: nothing runs
    problems.assert_clean("the tenant's spend")
