"""The Content-Security-Policy holds in a real browser: no page breaks it (issue 20).

Chromium reports every blocked script, style, image or handler as a `securitypolicyviolation` event and a
console error; both are collected on the main pages, the Plotly chart pages among them, the API docs too.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from apps.fleet.models import Node
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.health.ingest import run_cycle
from tests.e2e.browser import PageProblems, log_in

pytestmark = pytest.mark.e2e

RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`);
});
"""


@pytest.fixture
def fleet(personas_live):
    cluster = create_simulated_cluster(None, "sim-csp", {"nodes": 2, "gpus_per_node": 8, "seed": 3})
    assert sync_inventory(cluster.pk).ok
    run_cycle(cluster.pk)
    return cluster


def violations(page: Page) -> list[str]:
    return page.evaluate("window.__csp || []")


def visit(page: Page, problems: PageProblems, path: str) -> None:
    problems.reset()
    response = page.goto(path)
    assert response is not None and response.status == 200, path
    policy = response.headers["content-security-policy"].split(";")
    (scripts,) = [directive for directive in policy if directive.strip().startswith("script-src")]
    assert "'self'" in scripts and "unsafe" not in scripts
    page.wait_for_load_state("networkidle")
    assert violations(page) == [], f"CSP violations on {path}"
    problems.assert_clean(path)


def test_no_page_violates_the_content_security_policy(page: Page, problems: PageProblems, fleet):
    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, "root")
    assert violations(page) == []
    expect(page.locator("#overview-heatmap .main-svg").first).to_be_visible()  # Plotly draws under the policy
    node = Node.objects.filter(cluster=fleet).order_by("name").first()
    for path in (
        "/",
        f"/health/nodes/{node.pk}/",
        "/chargeback/",
        "/observability/waits/",
        "/workloads/new/",
        "/fleet/capacity/",
        "/fleet/",
        "/audit/",
        "/accounts/tokens/",
        "/api/v1/docs/",
    ):
        visit(page, problems, path)
    # Plotly charts drew on the chart pages (nonce'd inline scripts ran).
    page.goto(f"/health/nodes/{node.pk}/")
    expect(page.locator(".spark").first).to_be_attached()
    # Its inline script ran: every sparkline cell holds a chart or the "no data" dash it writes.
    cells = "[...document.querySelectorAll('.spark')]"
    assert page.evaluate(f"{cells}.every(el => el.querySelector('.main-svg') || el.textContent === '—')")
    page.goto("/chargeback/")
    expect(page.locator("#chart-tenant .main-svg").first).to_be_visible()
    # Swagger UI started from its script file (the split view), not an inline script.
    page.goto("/api/v1/docs/")
    expect(page.locator(".swagger-ui .information-container").first).to_be_visible()
    assert violations(page) == []
    # Redoc renders too; the one thing the policy stops there is its footer logo from Redocly's CDN (no CDN).
    page.goto("/api/v1/redoc/")
    expect(page.locator(".api-content").first).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert {v.split(" at ")[0] for v in violations(page)} <= {
        "img-src blocked https://cdn.redoc.ly/redoc/logo-mini.svg"
    }


def test_handlers_moved_out_of_the_markup_still_work(page: Page, problems: PageProblems, fleet):
    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, "root")
    # The language switcher submits on change (data-autosubmit in static/js/console.js, no onchange=).
    page.get_by_test_id("language-switcher").get_by_role("combobox").select_option("zh-hans")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.get_by_test_id("language-switcher").get_by_role("combobox").select_option("en")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    # Choosing a template on the submit page reloads it (data-autosubmit) and its script (static/js/submit.js) runs.
    page.goto("/workloads/new/")
    expect(page.get_by_test_id("preview-admission")).to_contain_text("Choose one of your queues first")
    select = page.locator('[data-testid="template-picker"] select[name="template"]')
    if select.locator("option").count() > 1:
        select.select_option(index=1)
        expect(page).to_have_url(re.compile(r"\?template="))
    assert violations(page) == []
    problems.assert_clean("the switchers")


def test_a_violation_is_seen(page: Page, problems: PageProblems, fleet):
    """The watcher is not blind: an inline script without the nonce is reported."""
    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, "root")
    page.evaluate("""() => { const s = document.createElement("script"); s.textContent = "window.x = 1";
                    document.body.appendChild(s); }""")
    page.wait_for_function("window.__csp.length > 0")
    assert any(v.startswith("script-src") for v in violations(page))
    assert page.evaluate("window.x") is None
