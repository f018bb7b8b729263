"""The submit form in the browser: a job is filled in without typing JSON, the previews beside the form follow each
edit (admission now, what the cluster receives, the cost), the YAML view edits the same spec both ways, and the
submission lands on the workload's page.

The world: one simulated cluster of 2 × 8 H100; Org A's queue `train` guarantees 8 of them, its team's queue
`vision` guarantees the other 8 and lends them while idle; H100 costs 2.50 an hour.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from apps.tenancy import services as tenancy
from apps.workloads.models import Workload
from apps.workloads.services import reconcile_workloads
from tests.e2e import world
from tests.e2e.browser import PageProblems, log_in, main_nav, screenshot
from tests.utils.personas import fresh

pytestmark = pytest.mark.e2e


@pytest.fixture
def fleet(personas_live):
    cluster = world.h100_cluster("sim-form", nodes=2, seed=5)
    setup = world.team_with_quota(personas_live, cluster, guaranteed=8)
    admin = fresh(personas_live.platform_admin)
    team = personas_live.a_team
    tenancy.set_guarantee_cap(admin, tenant=team, gpu_model=setup.h100, guaranteed=8)
    lender = tenancy.create_queue(admin, tenant=team, name="vision")
    tenancy.bind_queue(admin, lender, cluster=cluster, namespaces=["a-team-vision"])
    tenancy.set_quota(admin, queue=lender, gpu_model=setup.h100, guaranteed=8)
    return setup


# The editor's own controls and the mode toggles still enabled, counted while the switch's request is held.
ENABLED_WHILE_SWITCHING = """document.querySelectorAll(
    '#spec-editor :is(textarea, input, select):enabled, [data-mode-to]:enabled, #submit-form [type=submit]:enabled'
).length"""


def switch_editor(page: Page, form, to: str) -> None:
    """Click "Form" or "YAML" and wait for the editor's reply, which replaces the editor whole.

    Nothing on the page tells that the reply has come: the live previews may already show the very error it brings
    (their spec-errors event), and a box filled before the reply is replaced by it. While the request is held the
    editor, the toggles and Submit must all be disabled, or a person typing then loses what they typed."""
    enabled: list[int] = []

    def hold(route) -> None:
        enabled.append(page.evaluate(ENABLED_WHILE_SWITCHING))
        route.continue_()

    page.route("**/new/editor/", hold)
    try:
        with page.expect_response(lambda r: "/new/editor/" in r.url):
            form.get_by_role("button", name=to).click()
    finally:
        page.unroute("**/new/editor/", hold)
    assert enabled == [0], f"controls enabled while the editor was being switched to {to}: {enabled}"


def test_a_job_is_filled_in_previewed_and_submitted_without_json(page: Page, problems: PageProblems, fleet):
    log_in(page, "ta-a")
    main_nav(page, "Workloads")
    page.get_by_role("link", name="Submit", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Submit a workload")
    form = page.get_by_test_id("submit-form")
    screenshot(page, "submit-form-start")
    admission = page.get_by_test_id("preview-admission")
    rendering = page.get_by_test_id("preview-rendering")
    cost = page.get_by_test_id("preview-cost")

    # The fields, as a person fills them in: no JSON anywhere.
    form.get_by_label("Name", exact=True).fill("form-job")
    form.get_by_label("Queue", exact=True).select_option("a/train")
    form.get_by_label("GPU model", exact=True).select_option("h100")
    form.get_by_label("Command", exact=True).fill("python\ntrain.py")
    form.get_by_label("Arguments", exact=True).fill("--config\nconfigs/8b.yaml")
    form.get_by_label("Workers", exact=True).fill("1")
    form.get_by_label("GPUs per worker", exact=True).fill("8")
    form.get_by_label("Maximum runtime (s)", exact=True).fill("3600")
    form.get_by_label("Environment", exact=True).fill("NCCL_DEBUG=INFO")

    # Within the queue's guarantee: it would start now; the cluster gets a Job that passes strict validation.
    expect(admission.get_by_test_id("admission-headline")).to_have_text("Would start now, within guarantee.")
    expect(admission.get_by_test_id("admission-reason")).to_contain_text("within guarantee (8 of 8)")
    expect(rendering.get_by_test_id("rendering-title")).to_have_text("Manifests")
    expect(rendering.get_by_test_id("rendering-validation")).to_contain_text("Strict validation passed")
    expect(rendering.get_by_test_id("rendering-text")).to_contain_text("NCCL_DEBUG")
    expect(cost.get_by_test_id("cost-per-hour")).to_contain_text("20.00 USD")  # 8 GPUs × 2.50
    expect(cost.get_by_test_id("cost-runtime")).to_contain_text("20.00 USD")  # for its hour
    screenshot(page, "submit-form-within-guarantee", docs=True)
    problems.assert_clean("the submit form")

    # Two workers: 16 H100, 8 more than the guarantee; the team's idle queue lends them.
    form.get_by_label("Workers", exact=True).fill("2")
    expect(admission.get_by_test_id("admission-headline")).to_have_text(
        "Would start now, borrowing 8 from a-team/vision."
    )
    expect(cost.get_by_test_id("cost-per-hour")).to_contain_text("40.00 USD")
    expect(rendering.get_by_test_id("rendering-text")).to_contain_text("parallelism: 2")

    # Three: 24, more than the cluster and every lender have: it would wait, saying for what.
    form.get_by_label("Workers", exact=True).fill("3")
    expect(admission.get_by_test_id("admission-headline")).to_have_text(
        "Would wait: needs 24 × H100-80GB-HBM3, 8 free within guarantee."
    )
    expect(admission.get_by_test_id("admission-reason")).to_contain_text("needs 24 × H100")
    screenshot(page, "submit-form-would-wait")

    # A spec error shows at its field, and the previews say to fix the spec first.
    form.get_by_label("Name", exact=True).fill("Form_Job")
    expect(admission.get_by_test_id("preview-fix")).to_be_visible()
    expect(form.locator('[data-errors-for="name"]')).to_contain_text("not a valid name")
    expect(cost.get_by_test_id("preview-fix")).to_be_visible()
    screenshot(page, "submit-form-spec-error")
    form.get_by_label("Name", exact=True).fill("form-job")
    expect(form.locator('[data-errors-for="name"]')).to_be_empty()

    # The same spec as YAML, edited there and back in the fields.
    switch_editor(page, form, "YAML")
    box = form.get_by_test_id("spec-yaml")
    expect(box).to_contain_text("workers: 3")
    expect(box).to_contain_text("tenant: a")
    box.fill(box.input_value().replace("workers: 3", "workers: 1"))
    expect(admission.get_by_test_id("admission-headline")).to_have_text("Would start now, within guarantee.")
    screenshot(page, "submit-form-yaml")
    box.fill("workers: [1,\n")
    switch_editor(page, form, "Form")
    expect(form.get_by_test_id("errors-spec")).to_contain_text("Not valid YAML")
    box = form.get_by_test_id("spec-yaml")
    box.fill(
        "name: form-job\ntenant: a\nqueue: train\nimage: nvcr.io/nvidia/pytorch:24.08-py3\n"
        "command: [python, train.py]\ngpu_model: h100\nworkers: 1\ngpus_per_worker: 8\nmax_runtime_s: 3600\n"
    )
    switch_editor(page, form, "Form")
    expect(form.get_by_label("Workers", exact=True)).to_have_value("1")
    expect(form.get_by_label("Command", exact=True)).to_have_value("python\ntrain.py")
    expect(form.get_by_label("Queue", exact=True)).to_have_value("a/train")
    expect(admission.get_by_test_id("admission-headline")).to_have_text("Would start now, within guarantee.")
    problems.assert_clean("editing as YAML")

    form.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("alert").filter(has_text="Submitted form-job")).to_be_visible()
    workload = Workload.objects.get(name="form-job")
    expect(page).to_have_url(re.compile(rf"/workloads/{workload.pk}/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("form-job")
    assert workload.spec["command"] == ["python", "train.py"] and workload.gpus == 8
    problems.assert_clean("the submission")

    # It starts (the reconcile pass beat runs) and its log is tailed live from the workload page.
    reconcile_workloads()
    page.get_by_test_id("workload-logs-link").click()
    lines = page.get_by_test_id("log-lines")
    expect(lines).to_contain_text("submitted: 1 × 8 GPUs")
    shown = page.locator("#log-lines span").count()
    page.wait_for_function("n => document.querySelectorAll('#log-lines span').length > n", arg=shown)
    expect(lines).to_contain_text("step ")
    problems.assert_clean("the log tail")


def test_the_service_form_reads_in_chinese(page: Page, problems: PageProblems, fleet):
    log_in(page, "member-a")
    page.get_by_test_id("language-switcher").get_by_role("combobox").select_option("zh-hans")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.goto("/workloads/new/?kind=inference")
    form = page.get_by_test_id("submit-form")
    expect(form.get_by_test_id("section-serving")).to_contain_text("推理服务")
    form.get_by_label("名称", exact=True).fill("chat")
    form.get_by_label("GPU 型号", exact=True).select_option("h100")
    form.get_by_label("优先级", exact=True).select_option("online-inference")
    expect(page.get_by_test_id("preview-admission").get_by_test_id("admission-headline")).to_have_text(
        "会立即启动，在保证额度内。"
    )
    expect(page.get_by_test_id("preview-cost").get_by_test_id("cost-runtime")).to_contain_text("没有运行时间上限")
    expect(page.get_by_test_id("preview-rendering").get_by_test_id("rendering-validation")).to_contain_text(
        "严格校验通过"
    )
    screenshot(page, "submit-form-service-zh")
    problems.assert_clean("the service form in Chinese")
