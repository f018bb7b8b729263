"""Journey of a CI pipeline: a token made in the browser, then curl as in the README's "A CI pipeline with a token".

A tenant admin creates a token for the team's service account (shown once); the pipeline submits a job with
an Idempotency-Key (a retry returns the same workload), polls it until it succeeds, submits and cancels
another; the browser shows both in their final states, and once the token is revoked curl gets a 401.
The world: a simulated cluster with Org A's queue, and simulated time passing between the pipeline's polls
(where the README's loop sleeps).
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from playwright.sync_api import Page, expect

from apps.workloads import services as workloads
from apps.workloads.models import Workload
from tests.e2e import world
from tests.e2e.browser import PageProblems, log_in, main_nav, screenshot
from tests.utils.personas import fresh
from tests.utils.simulator import full_runs, runs_to_the_end

pytestmark = pytest.mark.e2e

FINAL = {"succeeded", "failed", "cancelled", "rejected", "preempted"}


@pytest.fixture
def queue_for_ci(personas_live):
    cluster = world.h100_cluster("sim-ci", nodes=2, seed=5)
    world.team_with_quota(personas_live, cluster, guaranteed=8)
    # The team's own work next to the pipeline's: one job running, one too big for the guarantee, waiting.
    member = fresh(personas_live.member_a)
    for spec in (
        world.training_spec("llm-eval", gpus=4, runtime_s=8 * 3600),
        world.training_spec("llm-pretrain", workers=2, gpus=8, runtime_s=8 * 3600),
    ):
        workloads.submit_workload(member, kind="training", spec=spec)
    workloads.reconcile_workloads()
    return cluster


def curl(*args: str, fail: bool = True) -> tuple[int, dict[str, str], str]:
    """Run curl as a pipeline would (`-sf`: silent, an HTTP error fails the command); the status line and
    headers are read back from `-D -`."""
    flags = ["-sf"] if fail else ["-s"]
    done = subprocess.run(["curl", *flags, "-D", "-", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"curl {' '.join(args)} exited {done.returncode}: {done.stdout}{done.stderr}"
    head, _, body = done.stdout.partition("\n\n")  # text mode: curl's CRLFs arrive as newlines
    status_line, *header_lines = head.splitlines()
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


def body_for(name: str, runtime_s: int) -> str:
    """The README's BODY, for Org A's queue."""
    spec = {
        "name": name,
        "tenant": "a",
        "queue": "train",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["python", "train.py"],
        "workers": 1,
        "gpus_per_worker": 1,
        "gpu_model": "h100",
        "max_runtime_s": runtime_s,
    }
    return json.dumps({"kind": "training", "spec": spec})


def test_ci_submits_waits_and_cancels_with_a_token_from_the_browser(
    page: Page, problems: PageProblems, live_server, queue_for_ci, monkeypatch
):
    # The smoke run must succeed: its simulated run may start after runs_to_the_end below (the outbox sends it).
    full_runs(monkeypatch)
    # The token: created for the team's service account, shown once.
    log_in(page, "ta-a")
    page.get_by_role("button", name="ta-a").click()  # the user menu
    page.get_by_role("link", name="API tokens", exact=True).click()
    form = page.locator("form", has=page.get_by_role("button", name="Create token"))
    form.get_by_role("textbox", name="Name").fill("gitlab-ci train-pipeline")
    form.get_by_role("combobox", name="User").select_option(label="ci-a")
    form.get_by_role("combobox", name="Tenant").select_option(label="Org A (a)")
    form.get_by_role("combobox", name="Role").select_option("member")
    form.get_by_role("button", name="Create token").click()
    expect(page.get_by_role("alert").filter(has_text="Created token gitlab-ci train-pipeline")).to_be_visible()
    token = page.locator("#new-token-value").inner_text().strip()
    assert re.fullmatch(r"gpuc_[A-Za-z0-9_-]{20,}", token), token
    row = page.locator("main table tbody tr", has_text="gitlab-ci train-pipeline")
    expect(row).to_contain_text("ci-a")
    expect(row).to_contain_text("member @ a")
    expect(row.locator("code")).to_have_text(f"{token[:12]}…")  # only its prefix is listed
    expect(page.get_by_test_id("ci-example")).to_contain_text('-H "Idempotency-Key: $CI_PIPELINE_ID-train"')
    screenshot(page, "tokens", docs=True)
    page.reload()  # shown once: the create redirected, so this is a plain GET
    expect(page.get_by_test_id("new-token")).to_have_count(0)
    assert token not in page.content()
    problems.assert_clean("the token page")

    api = f"{live_server.url}/api/v1"
    bearer = f"Authorization: Bearer {token}"
    status, _, me = curl("-H", bearer, f"{api}/me/")
    assert status == 200, me
    assert json.loads(me)["username"] == "ci-a"
    assert json.loads(me)["token"] == {
        "name": "gitlab-ci train-pipeline",
        "prefix": token[:12],
        "role": "member",
        "tenant": "a",
    }

    # Submit; the retry of the same POST (same Idempotency-Key) gets the same workload back.
    submit = ["-H", bearer, "-H", "Content-Type: application/json", "-H", "Idempotency-Key: 4711-train"]
    status, headers, created = curl(*submit, "-d", body_for("ci-smoke", 600), f"{api}/workloads/")
    assert (status, headers["idempotent-replayed"]) == (201, "false"), created
    smoke_id = json.loads(created)["id"]
    runs_to_the_end(Workload.objects.get(pk=smoke_id))
    status, headers, replayed = curl(*submit, "-d", body_for("ci-smoke", 600), f"{api}/workloads/")
    assert (status, headers["idempotent-replayed"], json.loads(replayed)["id"]) == (200, "true", smoke_id)
    assert Workload.objects.filter(name="ci-smoke").count() == 1
    other = ["-H", bearer, "-H", "Content-Type: application/json", "-H", "Idempotency-Key: 4711-other"]
    status, _, created = curl(*other, "-d", body_for("ci-other", 3600), f"{api}/workloads/")
    assert status == 201, created
    other_id = json.loads(created)["id"]

    # Wait for it as the README's loop does; where the loop sleeps, simulated minutes pass on the cluster.
    def poll(workload_id: int, until: set[str]) -> list[str]:
        seen = []
        for _ in range(10):
            _, _, body = curl("-H", bearer, f"{api}/workloads/{workload_id}/")
            seen.append(json.loads(body)["state"])
            if seen[-1] in until:
                return seen
            world.time_passes(queue_for_ci, 4)
        raise AssertionError(f"workload {workload_id} never reached {until}: {seen}")

    states = poll(smoke_id, FINAL)
    assert states[-1] == "succeeded" and "running" in states, states

    # Cancel the other one, with a reason; it is gone from the cluster at the next pass.
    status, _, cancelled = curl(
        "-X", "POST", "-H", bearer, "-H", "Content-Type: application/json",
        "-d", '{"reason": "superseded"}', f"{api}/workloads/{other_id}/cancel/",
    )  # fmt: skip
    assert status == 200 and json.loads(cancelled)["state"] in {"cancelling", "cancelled"}, cancelled
    assert poll(other_id, FINAL)[-1] == "cancelled"

    # The browser shows both where the pipeline left them.
    main_nav(page, "Workloads")
    listed = page.get_by_test_id("workload-list")
    expect(listed.locator("tr", has_text="ci-smoke").get_by_test_id("workload-state")).to_have_text("succeeded")
    expect(listed.locator("tr", has_text="ci-other").get_by_test_id("workload-state")).to_have_text("cancelled")
    expect(listed.locator("tr", has_text="ci-other")).to_contain_text("superseded")
    expect(listed.locator("tr", has_text="llm-eval").get_by_test_id("workload-state")).to_have_text("running")
    expect(listed.locator("tr", has_text="llm-pretrain").get_by_test_id("workload-state")).to_have_text("pending")
    screenshot(page, "workloads", docs=True)
    listed.get_by_role("link", name="ci-other").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("ci-other")
    expect(page.locator("main dl")).to_contain_text("by ci-a · Idempotency-Key: 4711-other")
    cancel_event = page.get_by_test_id("workload-events").locator("tr", has=page.get_by_text("cancel", exact=True))
    expect(cancel_event).to_contain_text("superseded")
    expect(page.get_by_test_id("cancel-form")).to_have_count(0)
    problems.assert_clean("the pipeline's workloads")

    # The pipeline's token used, then revoked: curl gets 401 with the reason.
    page.get_by_role("button", name="ta-a").click()
    page.get_by_role("link", name="API tokens", exact=True).click()
    row = page.locator("main table tbody tr", has_text="gitlab-ci train-pipeline")
    expect(row.locator("td").nth(6)).not_to_have_text("—")  # last used
    row.get_by_role("button", name="Revoke").click()  # asks first, naming who loses access
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_test_id("confirm-impact")).to_contain_text("acting as ci-a")
    dialog.get_by_role("button", name="Revoke token").click()
    expect(page.get_by_role("alert").filter(has_text="Revoked token gitlab-ci train-pipeline")).to_be_visible()
    expect(row).to_contain_text("revoked")
    status, _, refused = curl("-H", bearer, f"{api}/me/", fail=False)
    assert status == 401 and json.loads(refused)["message"] == "This API token was revoked.", refused
    problems.assert_clean("the revocation")
