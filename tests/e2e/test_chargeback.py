"""Chargeback in a real browser: the charts render offline, a platform admin closes the month, the statement prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from playwright.sync_api import Page, expect

from apps.backends.simulator.services import create_simulated_cluster
from apps.backends.types import UsageRecord as BackendUsage
from apps.chargeback import services as chargeback
from apps.chargeback.metering import build_records
from apps.chargeback.models import MeterWatermark, UsageRecord
from apps.chargeback.periods import month_start, next_month
from apps.chargeback.rollup import add_to_rollup
from apps.fleet.models import GpuModel
from apps.tenancy import services as tenancy
from tests.e2e.browser import PageProblems, log_in, screenshot

pytestmark = pytest.mark.e2e


@pytest.fixture
def last_month_of_usage(personas_live):
    from django.utils import timezone

    admin = personas_live.platform_admin
    cluster = create_simulated_cluster(
        None, "sim", {"nodes": 1, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 2}
    )
    for tenant in (personas_live.a, personas_live.a_team):
        tenancy.create_queue(admin, tenant=tenant, name="train")
    chargeback.set_rate(
        admin, gpu_model=GpuModel.objects.get(code="h100"), rate="2.50", effective_from=datetime(2020, 1, 1, tzinfo=UTC)
    )
    start = month_start(month_start(timezone.now()) - timedelta(days=1))
    usage = [
        BackendUsage(
            f"{slug}-{day}",
            slug,
            "train",
            "h100",
            gpus,
            start + timedelta(days=day),
            start + timedelta(days=day, hours=6),
        )
        for day in range(0, 28, 2)
        for slug, gpus in (("a", 2), ("a-team", 8))
    ]
    rows = build_records(cluster, usage, start)
    with transaction.atomic():
        UsageRecord.objects.bulk_create(rows)
        add_to_rollup(rows)
    MeterWatermark.objects.create(cluster=cluster, metered_until=next_month(start))
    return start


def test_charts_render_and_the_month_closes(page: Page, problems: PageProblems, last_month_of_usage):
    label = f"{last_month_of_usage:%Y-%m}"
    log_in(page, "ta-a")
    page.goto(f"/chargeback/?period={label}")
    expect(page.get_by_role("heading", level=1)).to_contain_text(label)
    for chart in ("chart-tenant", "chart-model", "chart-use"):
        expect(page.get_by_test_id(chart).locator(".main-svg").first).to_be_visible()
    expect(page.get_by_test_id("waste")).to_contain_text("a-team")
    screenshot(page, "chargeback-overview")
    problems.assert_clean("chargeback overview")

    page.context.clear_cookies()
    log_in(page, "root")
    page.goto("/chargeback/periods/")
    row = page.get_by_test_id("periods").locator("tr", has_text=label)
    row.get_by_role("button", name="Close period").click()  # opens a dialog that says what closing does
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_test_id("confirm-impact")).to_contain_text(f"locks the usage records and credits of {label}")
    dialog.get_by_label("Reason (optional)").fill("month end")
    dialog.get_by_role("button", name=f"Close {label}").click()
    expect(page.get_by_role("alert")).to_contain_text("closed")
    page.goto("/chargeback/statements/")
    org_row = page.get_by_test_id("statements").locator("tr", has=page.get_by_role("cell", name="a", exact=True))
    org_row.get_by_role("link", name="view").click()
    # Org A's statement rolls up its team: (2 + 8) GPUs × 6 h × 14 days × 2.50 USD.
    expect(page.get_by_test_id("total")).to_have_text("2100.00 USD")
    screenshot(page, "chargeback-statement")
    problems.assert_clean("statement")
