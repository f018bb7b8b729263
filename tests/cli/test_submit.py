"""gpuc submit and the workload commands, end to end: a real gpuc process, the live server, a real Celery worker."""

from __future__ import annotations

import itertools

import pytest

from apps.workloads.models import Workload
from tests.cli.conftest import TimePasses, write_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_submit_and_wait_until_it_succeeds(gpuc, console):
    job = write_job(gpuc.home)
    done = gpuc("submit", "-f", job, "--wait", "--interval", "0.2", "-o", "json",
                while_waiting=TimePasses(console.fleet["cluster"]))  # fmt: skip
    assert done.code == 0, done
    final = done.json()
    workload = Workload.objects.get(name="ci-smoke")
    assert (final["id"], final["state"], workload.state) == (workload.pk, "succeeded", "succeeded")
    assert workload.created_by == console.personas.ci_a and workload.idempotency_key is None  # outside CI: no key
    # Not a TTY: one progress line per state change, on stderr, never on stdout.
    lines = [line.split("] ", 1)[1] for line in done.stderr.splitlines() if line.startswith("[")]
    states = [line.split(": ")[1] for line in lines]
    assert states[-1] == "succeeded" and "running" in states, done.stderr
    assert all(a != b for a, b in itertools.pairwise(lines)), done.stderr  # polled every 0.2 s, written on change only
    assert f"submitted: #{workload.pk} ci-smoke" in done.stderr


def test_a_workload_that_fails_while_waited_for_exits_1(gpuc, console):
    job = write_job(gpuc.home, "overruns", max_runtime_s=600)
    world = TimePasses(console.fleet["cluster"], overrunning=("overruns",))  # its work needs 20 of its 10 minutes
    failed = gpuc("submit", "-f", job, "--wait", "--interval", "0.2", "-o", "json", while_waiting=world)
    assert failed.code == 1, failed
    workload = Workload.objects.get(name="overruns")
    assert (failed.json()["state"], workload.state) == ("failed", "failed"), failed
    assert workload.state_reason, workload
    assert f"gpuc: workload #{workload.pk} overruns failed: {workload.state_reason}" in failed.stderr, failed


def test_a_spec_the_console_refuses_exits_2_with_the_field_error(gpuc):
    job = write_job(gpuc.home, "bad-one", gpus_per_worker=9)  # a node has 8
    refused = gpuc("submit", "-f", job, "--wait")
    assert refused.code == 2, refused
    assert refused.stderr.startswith("gpuc: error: Invalid spec: "), refused
    assert "(HTTP 400, invalid)" in refused.stderr, refused
    assert "\n  gpus_per_worker: a worker runs on one node: 9 GPUs exceed the 8 GPUs per node" in refused.stderr, (
        refused
    )
    assert "request id: " in refused.stderr
    assert refused.stdout == ""
    assert not Workload.objects.exists()


def test_a_workload_cancelled_while_waited_for_exits_2(gpuc, console):
    job = write_job(gpuc.home, "long-one", max_runtime_s=8 * 3600)
    cancels = []

    def someone_cancels_it():
        workload = Workload.objects.filter(name="long-one", state="running").first()
        if workload is not None and not cancels:
            cancels.append(gpuc("cancel", workload.pk, "--reason", "superseded by a newer commit"))

    waited = gpuc("submit", "-f", job, "--wait", "--interval", "0.2", while_waiting=someone_cancels_it)
    assert waited.code == 2, waited
    assert cancels and cancels[0].code == 0, cancels
    workload = Workload.objects.get(name="long-one")
    assert workload.state == "cancelled"
    assert "state:           cancelled" in waited.stdout, waited
    assert f"workload #{workload.pk} long-one cancelled: superseded by a newer commit" in waited.stderr, waited
    assert workload.events.filter(message__contains="superseded by a newer commit").exists()


def test_timeout_exits_3_and_leaves_the_workload_waiting(gpuc):
    first = gpuc("submit", "-f", write_job(gpuc.home, "holds-all", gpus_per_worker=8, workers=2))
    assert first.code == 0, first
    waited = gpuc("submit", "-f", write_job(gpuc.home, "waits", gpus_per_worker=8), "--timeout", "1.5",
                  "--interval", "0.3")  # fmt: skip
    assert waited.code == 3, waited
    workload = Workload.objects.get(name="waits")
    assert workload.state == "pending"
    assert f"timed out after 1.5 s waiting for workload #{workload.pk} (pending)" in waited.stderr, waited
    # It said why it waits while it waited: the reason the console gives.
    assert f"#{workload.pk} waits: pending: {workload.state_reason}" in waited.stderr, waited


def test_the_same_idempotency_key_twice_submits_once(gpuc):
    job = write_job(gpuc.home, "keyed", as_json=True)
    first = gpuc("submit", "-f", job, "--idempotency-key", "pipeline-4711-train", "-o", "json")
    again = gpuc("submit", "-f", job, "--idempotency-key", "pipeline-4711-train", "-o", "json")
    assert (first.code, again.code) == (0, 0), (first, again)
    assert first.json()["id"] == again.json()["id"]
    assert "already submitted (same Idempotency-Key)" in again.stderr
    workload = Workload.objects.get()
    assert workload.idempotency_key == "pipeline-4711-train"
    # Another body under the same key is refused, not submitted (409 idempotency_conflict): exit 2.
    other = write_job(gpuc.home, "keyed-other")
    conflict = gpuc("submit", "-f", other, "--idempotency-key", "pipeline-4711-train")
    assert conflict.code == 2 and "idempotency_conflict" in conflict.stderr, conflict
    assert Workload.objects.count() == 1


def test_a_bad_token_exits_4_with_the_console_s_message(gpuc):
    refused = gpuc("ls", env=gpuc.env(GPUC_TOKEN="gpuc_not-a-real-token-at-all"))
    assert refused.code == 4, refused
    assert "gpuc: error: Invalid API token. (HTTP 401, authentication_failed)" in refused.stderr, refused
    assert "token from GPUC_TOKEN" in refused.stderr
    missing = gpuc("ls", env=gpuc.env(GPUC_TOKEN=None))
    assert missing.code == 4 and "no API token" in missing.stderr, missing
    usage = gpuc("submit")  # no -f
    assert usage.code == 4 and "the following arguments are required: -f/--file" in usage.stderr, usage
    unreadable = gpuc("submit", "-f", gpuc.home / "nope.yaml")
    assert unreadable.code == 4 and "cannot read" in unreadable.stderr, unreadable
