"""gpuc logs and submit --follow against the live console's GET /api/v1/workloads/{id}/logs/ (docs/logs.md), on the
simulated cluster, whose log is generated from the run (the same on every read)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.workloads.models import Workload
from apps.workloads.services import reconcile_workloads
from tests.cli.conftest import TimePasses, write_job
from tests.utils.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _api_log(console, workload_id: int, **query) -> str:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {console.personas.token_a_raw}")
    response = client.get(f"/api/v1/workloads/{workload_id}/logs/", query)
    assert response.status_code == 200, response
    return b"".join(response.streaming_content).decode()


def test_logs_of_a_finished_run_and_of_one_not_started(gpuc, console):
    holds = gpuc("submit", "-f", write_job(gpuc.home, "holds-all", gpus_per_worker=8, workers=2))
    waits = gpuc("submit", "-f", write_job(gpuc.home, "waits", gpus_per_worker=8))
    assert (holds.code, waits.code) == (0, 0), (holds, waits)
    waiting = Workload.objects.get(name="waits")
    not_yet = gpuc("logs", waiting.pk)
    assert not_yet.code == 4 and "(HTTP 409, logs_not_ready)" in not_yet.stderr, not_yet

    ran = Workload.objects.get(name="holds-all")
    assert wait_until(lambda: Workload.objects.filter(pk=ran.pk, state="running").exists())
    world = TimePasses(console.fleet["cluster"], minutes=5)
    assert wait_until(lambda: world() or Workload.objects.filter(pk=ran.pk, state="succeeded").exists(), 30)
    whole = _api_log(console, ran.pk, tail=10000)
    assert "[worker 1] " in whole and "step " in whole  # two workers, each line says whose

    read = gpuc("logs", ran.pk, "--tail", "10000")
    assert read.code == 0, read
    assert read.stdout == whole
    last = gpuc("logs", ran.pk, "--tail", "3", "--worker", "1", "-f")  # a finished run's log: sent whole, then done
    assert last.code == 0, last
    assert last.stdout == _api_log(console, ran.pk, tail=3, worker=1)
    assert "[worker" not in last.stdout and "rank 1" in last.stdout  # worker 1's alone: no prefix
    bad = gpuc("logs", ran.pk, "--worker", "7")
    assert bad.code == 4 and "worker" in bad.stderr, bad


def test_submit_follow_streams_the_log_while_it_runs_then_exits_with_the_outcome(gpuc, console):
    job = write_job(gpuc.home, "followed")
    world = TimePasses(console.fleet["cluster"])
    done = gpuc("submit", "-f", job, "--follow", "--interval", "0.2", while_waiting=world)
    assert done.code == 0, done
    workload = Workload.objects.get(name="followed")
    reconcile_workloads()
    assert workload.state == "succeeded"
    log, _, table = done.stdout.partition("id:  ")
    assert "state:           succeeded" in table
    followed = log.splitlines()
    whole = _api_log(console, workload.pk, tail=10000).splitlines()
    # Every line came once and in order: what was followed is the run's log (its start may be past the tail of 200).
    assert followed and followed == whole[len(whole) - len(followed) :], (followed[:5], whole[:5])
    assert any(" step " in line for line in followed) and followed[-1].endswith("succeeded: completed")
