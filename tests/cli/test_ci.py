"""A CI job as it runs: a clean environment (PATH, HOME, the console's URL and token, the CI system's variables),
gpuc submit --wait, then the same step again, as a retried script or a runner that lost its connection would."""

from __future__ import annotations

import os

import pytest

from apps.audit.models import AuditEvent
from apps.workloads.models import Workload
from tests.cli.conftest import CLI_DIR, TimePasses, write_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_gitlab_job_submits_waits_and_running_again_submits_nothing_new(gpuc, console):
    job = write_job(gpuc.home, "ci-smoke")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(gpuc.home),
        "GPUC_URL": console.url,
        "GPUC_TOKEN": console.personas.token_a_raw,
        # GitLab's predefined variables for one run of one job.
        "CI": "true",
        "GITLAB_CI": "true",
        "CI_PROJECT_ID": "77",
        "CI_JOB_ID": "4711",
        "CI_PIPELINE_ID": "901",
        "PYTHONPATH": str(CLI_DIR),  # gpuc is not installed in the test environment (a pipeline pip-installs it)
    }
    world = TimePasses(console.fleet["cluster"])
    first = gpuc("submit", "-f", job, "--wait", "--interval", "0.2", env=env, while_waiting=world)
    assert first.code == 0, first
    workload = Workload.objects.get()
    assert workload.state == "succeeded"
    assert workload.idempotency_key == "gpuc:gitlab:77:4711:training:ci-smoke"
    assert "state:           succeeded" in first.stdout

    again = gpuc("submit", "-f", job, "--wait", "--interval", "0.2", env=env)
    assert again.code == 0, again
    assert "already submitted (same Idempotency-Key)" in again.stderr, again
    assert Workload.objects.count() == 1
    # Every request of the job carried its X-Request-ID: what the job changed is found by it.
    actions = list(AuditEvent.objects.filter(request_id="gpuc-gitlab-77-4711").values_list("action", flat=True))
    assert actions == ["workload.submit"], actions
    assert not (gpuc.home / ".config").exists()  # no login step, no file

    # A new job (a person pressed "Retry": GitLab gives it a new CI_JOB_ID) submits anew.
    retried = gpuc("submit", "-f", job, env={**env, "CI_JOB_ID": "4712"})
    assert retried.code == 0, retried
    assert Workload.objects.count() == 2
