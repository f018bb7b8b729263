"""Journey of a platform admin: a team's quota request approved in part, a rate changed, the month closed and
its statement downloaded.

The world: last month of Org A's H100 usage metered to the month's end and a pending quota request of its
tenant admin (filed through the service, as journey test_journey_team_admin files one in the browser).
Everything the platform admin does is a click or a form.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from apps.chargeback.models import RateCard
from apps.tenancy.models import Quota
from apps.tenancy.services import request_quota
from tests.e2e import world
from tests.e2e.browser import PageProblems, log_in, main_nav, screenshot
from tests.utils.personas import fresh

pytestmark = pytest.mark.e2e


@pytest.fixture
def month_to_close(personas_live):
    cluster = world.h100_cluster("sim-billing", nodes=1, seed=2)
    setup = world.team_with_quota(personas_live, cluster, guaranteed=8)
    start = world.last_month_metered(personas_live, cluster)
    request = request_quota(
        fresh(personas_live.tenant_admin_a),
        queue=setup.queue,
        gpu_model=setup.h100,
        guaranteed=16,
        justification="Two nodes for the 8B pre-training run.",
    )
    return {"start": start, "label": f"{start:%Y-%m}", "request": request, "queue": setup.queue}


def test_platform_admin_approves_quota_reprices_and_closes_the_month(
    page: Page, problems: PageProblems, month_to_close
):
    label, request = month_to_close["label"], month_to_close["request"]
    log_in(page, "root")

    # The quota request: approved in part, with a reason; the queue's guarantee follows.
    main_nav(page, "Tenants")
    page.get_by_role("link", name="Org A", exact=True).click()
    page.get_by_role("link", name="Quota requests").click()
    row = page.get_by_test_id("quota-requests").locator("tbody tr", has_text="16 × h100")
    expect(row).to_contain_text("Two nodes for the 8B pre-training run.")
    expect(row).to_contain_text("Pending")
    screenshot(page, "quota-requests", docs=True)
    decide = page.get_by_test_id(f"decide-{request.pk}")
    decide.get_by_label("Decision").select_option("yes")
    decide.get_by_label("Granted").fill("12")
    decide.get_by_label("Reason").fill("12 now, 4 more when the new H100 pool lands")
    decide.get_by_role("button", name="Decide").click()
    expect(page.get_by_role("alert").filter(has_text=f"Request {request.pk}: Approved in part")).to_be_visible()
    expect(row).to_contain_text("12 now, 4 more when the new H100 pool lands")
    expect(page.get_by_test_id(f"decide-{request.pk}")).to_have_count(0)
    assert Quota.objects.get(queue=month_to_close["queue"]).guaranteed == 12
    main_nav(page, "Tenants")
    page.get_by_role("link", name="Org A", exact=True).click()
    train = page.get_by_test_id("queue-quotas").locator("tr", has_text="a/train")
    expect(train.locator("td").nth(2)).to_have_text("12")  # guaranteed
    problems.assert_clean("the quota decision")

    # Last month's spend, by tenant and GPU model, before it is closed.
    main_nav(page, "Chargeback")
    page.get_by_role("link", name="Periods").click()
    page.get_by_test_id("periods").get_by_role("link", name=label).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(label)
    for chart in ("chart-tenant", "chart-model", "chart-use"):
        expect(page.get_by_test_id(chart).locator(".main-svg").first).to_be_visible()
    expect(page.get_by_test_id("waste").locator("tr", has_text="a-team")).to_contain_text("1680.00")  # 672 h × 2.50
    screenshot(page, "chargeback-overview", docs=True)
    problems.assert_clean("chargeback overview")

    # A new H100 rate from the start of last month: "change" on the current rate's row fills the form.
    page.get_by_role("link", name="Rate cards").click()
    page.get_by_test_id("rate-cards").locator("tr", has_text="h100").get_by_test_id("change-rate").click()
    form = page.locator("form", has=page.get_by_role("button", name="Save rate"))
    expect(page.get_by_role("heading", name="New rate for h100")).to_be_visible()
    expect(form.get_by_role("combobox", name="GPU model")).to_have_value("h100")
    expect(form.get_by_role("spinbutton", name="Rate")).to_have_value("2.500000")
    form.get_by_role("spinbutton", name="Rate").fill("3.00")
    form.get_by_label("Effective from").fill(f"{month_to_close['start']:%Y-%m-%dT%H:%M}")
    form.get_by_role("textbox", name="Note").fill("new supplier contract")
    form.get_by_role("button", name="Save rate").click()
    expect(page.get_by_role("alert").filter(has_text="Rate saved")).to_be_visible()
    cards = page.get_by_test_id("rate-cards").locator("tbody tr")
    expect(cards).to_have_count(2)  # the old rate stays in the history
    expect(cards.filter(has_text="new supplier contract")).to_contain_text("3.000000 USD")
    expect(page.get_by_test_id("change-rate")).to_have_count(1)  # on the newest rate only
    screenshot(page, "rate-cards")
    assert RateCard.objects.filter(note="new supplier contract", created_by__username="root").exists()

    # Closing the month writes the statements at the new rate.
    page.get_by_role("link", name="Periods").click()
    period = page.get_by_test_id("periods").locator("tr", has_text=label)
    period.get_by_role("button", name="Close period").click()  # asks first: what closing locks and writes
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_test_id("confirm-impact")).to_contain_text(f"locks the usage records and credits of {label}")
    dialog.get_by_label("Reason (optional)").fill("month end")
    dialog.get_by_role("button", name=f"Close {label}").click()
    expect(page.get_by_role("alert")).to_contain_text(f"Period {label} closed")
    expect(period).to_contain_text("closed")
    problems.assert_clean("closing the month")

    page.get_by_role("link", name="Statements").click()
    statement = page.get_by_test_id("statements").locator("tr", has=page.get_by_role("cell", name="a", exact=True))
    statement.get_by_role("link", name="view").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Org A")
    # Org A's statement rolls up its team: (2 + 8) GPUs × 6 h × 14 days × 3.00 USD.
    expect(page.get_by_test_id("total")).to_have_text("2520.00 USD")
    screenshot(page, "statement", docs=True)

    # The downloads: CSV lines with a total row, and the same figures as JSON.
    with page.expect_download() as csv_download:
        page.get_by_role("link", name="CSV", exact=True).click()
    assert csv_download.value.suggested_filename == f"statement-a-{label}.csv"
    rows = list(csv.DictReader(io.StringIO(Path(csv_download.value.path()).read_text(encoding="utf-8"))))
    usage = [r for r in rows if r["kind"] == "usage"]
    assert {(r["source_tenant"], r["gpu_model"], r["rate_per_gpu_hour"], r["amount"]) for r in usage} == {
        ("a", "h100", "3.000000", "504.00"),
        ("a-team", "h100", "3.000000", "2016.00"),
    }
    assert rows[-1]["kind"] == "total" and rows[-1]["amount"] == "2520.00" and rows[-1]["currency"] == "USD"
    with page.expect_download() as json_download:
        page.get_by_role("link", name="JSON", exact=True).click()
    assert json_download.value.suggested_filename == f"statement-a-{label}.json"
    exported = json.loads(Path(json_download.value.path()).read_text(encoding="utf-8"))
    assert (exported["period"], exported["period_state"], exported["tenant"]) == (label, "closed", "a")
    assert exported["totals"]["total"] == "2520.00"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT.*", exported["computed_at"])
    problems.assert_clean("the statement")
