"""A tenant admin in the browser: an inference service's TTFT/TPOT charts from its simulated engine, and its SLO."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from apps.backends.simulator.services import advance_time
from apps.fleet.models import GpuModel
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.inference.models import ServiceSlo
from apps.inference.scrape import scrape_services
from apps.tenancy import services as tenancy
from apps.workloads import services as workloads
from tests.e2e.browser import PageProblems, log_in, screenshot
from tests.inference.conftest import service_spec
from tests.utils.personas import fresh

pytestmark = pytest.mark.e2e


@pytest.fixture
def service(personas_live):
    personas = personas_live
    admin = fresh(personas.platform_admin)
    shape = {"nodes": 1, "gpus_per_node": 8, "models": {"h100": 1}, "seed": 5}
    cluster = create_simulated_cluster(None, "sim-e2e", shape)
    assert sync_inventory(cluster.pk).ok
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=8)
    queue = tenancy.create_queue(admin, tenant=personas.a, name="serve")
    tenancy.bind_queue(admin, queue, cluster=cluster, namespaces=["a-serve"])
    tenancy.set_quota(admin, queue=queue, gpu_model=h100, guaranteed=8)
    scaling = {"enabled": True, "min_replicas": 1, "max_replicas": 3, "waiting_threshold": 5}
    workload, _ = workloads.submit_workload(
        fresh(personas.member_a), kind="inference", spec=service_spec(engine="sglang", autoscaling=scaling)
    )
    workloads.reconcile_workloads()
    advance_time(None, cluster, 6)  # past the replica's cold start (image pull, weights, engine start)
    start = timezone.now() - timedelta(minutes=2)
    for i in range(5):  # five scrapes 15 s apart, the simulated engine three minutes further each time
        if i:
            advance_time(None, cluster, 3)
        assert scrape_services(start + i * timedelta(seconds=15))["ok"] == 1
    workload.refresh_from_db()
    assert workload.state == "running"
    return workload


def test_tenant_admin_sees_charts_and_sets_the_slo(page: Page, problems: PageProblems, service):
    log_in(page, "ta-a")
    page.goto(f"/workloads/{service.pk}/")
    panel = page.get_by_test_id("service-telemetry")
    expect(panel.get_by_test_id("telemetry-status")).to_contain_text("fresh")
    expect(panel.get_by_test_id("telemetry-status")).to_contain_text(
        f"/simulator/sim-e2e/services/{service.backend_name}"
    )
    for chart in ("chart-ttft", "chart-tpot", "chart-replicas"):
        expect(page.get_by_test_id(chart).locator("svg.main-svg").first).to_be_visible()
    expect(page.get_by_test_id("chart-ttft")).to_contain_text("Time to first token")
    expect(page.get_by_test_id("slo-status")).to_contain_text("TTFT ≤ 2 s, TPOT ≤ 0.1 s for 99% of requests")
    problems.assert_clean("service page")
    screenshot(page, "service-telemetry")

    form = page.get_by_test_id("slo-form")
    form.get_by_label("TTFT target (s)").fill("1.5")
    form.get_by_label("TPOT target (s)").fill("0.08")
    form.get_by_label("Objective").fill("0.995")
    form.get_by_label("Reason").fill("chat latency")
    form.get_by_role("button", name="Set SLO").click()
    expect(page.get_by_role("alert").filter(has_text="SLO of chat updated")).to_be_visible()
    expect(page.get_by_test_id("slo-status")).to_contain_text("TTFT ≤ 1.5 s, TPOT ≤ 0.08 s for 99.5% of requests")
    assert ServiceSlo.objects.get(workload=service).objective == 0.995
    problems.assert_clean("after the SLO edit")
