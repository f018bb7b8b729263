"""A Slurm job's log against the real local cluster: the tail of a running job's output file, follow that sends
what the job writes and ends when the job ends, a pending job refused, an inference array's tasks as workers; the
CLI run locally and on the login node over SSH."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from apps.backends.base import LogsNotReady, LogWorkerError
from apps.backends.slurm.backend import SlurmBackend
from apps.backends.types import BackendState, LogSource
from tests.backends.console_specs import console_spec
from tests.backends.slurm.conftest import unique, wait_for
from tests.backends.slurm.test_ssh_mode import ssh_backend


def shell_job(name: str, script: str, *, seconds: int = 120):
    """The console's training script running `sh -c script` (torchrun is a stand-in on the jobs' PATH)."""
    return console_spec(
        name,
        tenant="t",
        command=["sh", "-c", script],
        gpu_model="a100",
        max_runtime_s=seconds + 120,
        tier="normal",
        slurm_account="root",
    )


def source(name: str, **fields) -> LogSource:
    return LogSource(name=name, workload_id=name, **fields)


def output_of(local_slurm, name: str) -> list[Path]:
    return sorted(Path(local_slurm.jobs_dir).glob(f"{name}-*.out"))


def running(backend: SlurmBackend, name: str) -> None:
    wait_for(lambda: backend.status([name])[name].state == BackendState.RUNNING, f"{name} running")


@pytest.fixture(params=["cli", "ssh"])
def backend(request, local_slurm, slurm_backend):
    """The CLI run locally, and on the login node over SSH (where `tail` runs then too)."""
    if request.param == "cli":
        return slurm_backend
    return ssh_backend(local_slurm, request.getfixturevalue("ssh_login_node"))


def test_the_tail_of_a_running_jobs_output(backend, local_slurm, cleanup):
    name = unique("log-tail")
    cleanup[0].append(name)
    backend.submit(shell_job(name, "for i in $(seq 1 30); do echo line $i; done; sleep 120"))
    running(backend, name)
    wait_for(
        lambda: output_of(local_slurm, name) and "line 30" in output_of(local_slurm, name)[0].read_text(),
        "the job's 30 lines in its output file",
    )
    assert list(backend.stream_logs(source(name), tail=3, follow=False, worker=None)) == [
        "line 28",
        "line 29",
        "line 30",
    ]
    assert list(backend.stream_logs(source(name, workers=2), tail=2, follow=False, worker=0)) == ["line 29", "line 30"]
    lines = list(backend.stream_logs(source(name), tail=200, follow=False, worker=None))
    assert lines[-30:] == [f"line {i}" for i in range(1, 31)]
    with pytest.raises(LogWorkerError, match="one output file for all its ranks"):
        backend.stream_logs(source(name, workers=2), tail=2, follow=False, worker=1)


def test_follow_sends_what_the_job_writes_and_ends_when_the_job_ends(backend, local_slurm, cleanup):
    name = unique("log-follow")
    cleanup[0].append(name)
    # Time enough after its first line for the follow to start before the ticks, even on a loaded machine (a job
    # this short may end between two status reads: the first line in its file is the sign it runs).
    backend.submit(shell_job(name, "echo first; sleep 8; for i in 1 2 3 4 5; do echo tick $i; sleep 1; done"))
    wait_for(
        lambda: output_of(local_slurm, name) and "first" in output_of(local_slurm, name)[0].read_text(),
        "the job's first line",
    )
    got: list[str] = []
    arrived: list[float] = []

    def follow():
        for line in backend.stream_logs(source(name), tail=1, follow=True, worker=None, until=time.monotonic() + 90):
            got.append(line)
            arrived.append(time.monotonic())

    started = time.monotonic()
    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    wait_for(lambda: "tick 1" in got, "a line written after the request", timeout=40)
    assert got[0] == "first"
    reader.join(timeout=60)
    assert not reader.is_alive(), f"the stream did not end with the job: {got}"
    assert got == ["first", *(f"tick {i}" for i in range(1, 6))]
    assert arrived[-1] - arrived[1] >= 3  # the ticks came as they were written, a second apart
    assert time.monotonic() - started < 40
    assert backend.status([name])[name].state == BackendState.SUCCEEDED


def test_follow_ends_at_the_limit_while_the_job_runs_on(slurm_backend, local_slurm, cleanup):
    name = unique("log-limit")
    cleanup[0].append(name)
    slurm_backend.submit(shell_job(name, "echo hello; sleep 300"))
    running(slurm_backend, name)
    wait_for(lambda: output_of(local_slurm, name), "its output file")
    started = time.monotonic()
    lines = list(slurm_backend.stream_logs(source(name), tail=5, follow=True, worker=None, until=started + 3))
    assert lines == ["hello"] and 2.5 < time.monotonic() - started < 15
    assert slurm_backend.status([name])[name].state == BackendState.RUNNING
    # closing the stream ends its tail at once
    stream = slurm_backend.stream_logs(source(name), tail=5, follow=True, worker=None, until=time.monotonic() + 60)
    assert next(stream) == "hello"
    started = time.monotonic()
    stream.close()
    assert time.monotonic() - started < 10
    path = str(output_of(local_slurm, name)[0])
    assert not tails_of(path)
    # closed before any line was read: its tail is stopped all the same
    slurm_backend.stream_logs(source(name), tail=5, follow=True, worker=None, until=time.monotonic() + 60).close()
    assert not tails_of(path)


def tails_of(path: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", f"tail -n .* -- {path}"], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if "pgrep" not in line]


def test_a_pending_job_has_no_log_yet_and_a_finished_one_is_read_whole(slurm_backend, local_slurm, cleanup):
    held = unique("log-held")
    cleanup[0].append(held)
    local_slurm.run(
        "sbatch",
        "--hold",
        f"--job-name={held}",
        "--partition=gpu",
        f"--output={local_slurm.jobs_dir}/{held}-%j.out",
        "--wrap=echo never",
    )
    with pytest.raises(LogsNotReady, match="has not started yet"):
        slurm_backend.stream_logs(source(held), tail=10, follow=True, worker=None)
    with pytest.raises(LogsNotReady, match="Slurm has no job named"):
        slurm_backend.stream_logs(source(unique("log-none")), tail=10, follow=False, worker=None)

    done = unique("log-done")
    cleanup[0].append(done)
    slurm_backend.submit(shell_job(done, "echo all; echo done"))
    wait_for(lambda: slurm_backend.status([done])[done].state.finished, f"{done} finished")
    started = time.monotonic()
    lines = list(slurm_backend.stream_logs(source(done), tail=10, follow=True, worker=None, until=started + 60))
    assert lines[-2:] == ["all", "done"] and time.monotonic() - started < 5  # nothing more to follow


def test_an_arrays_tasks_are_the_replicas(slurm_backend, local_slurm, cleanup):
    """An inference service of several replicas is an array, one output file per task (`<name>-%A_%a.out`)."""
    name = unique("log-array")
    cleanup[0].append(name)
    local_slurm.run(
        "sbatch",
        "--array=0-1",
        f"--job-name={name}",
        "--partition=gpu",
        f"--output={local_slurm.jobs_dir}/{name}-%A_%a.out",
        "--wrap=echo replica $SLURM_ARRAY_TASK_ID up; sleep 120",
    )
    wait_for(
        lambda: len([p for p in output_of(local_slurm, name) if "up" in p.read_text()]) == 2, "both tasks' first line"
    )
    service = source(name, kind="inference", workers=2)
    assert list(slurm_backend.stream_logs(service, tail=5, follow=False, worker=None)) == [
        "[worker 0] replica 0 up",
        "[worker 1] replica 1 up",
    ]
    assert list(slurm_backend.stream_logs(service, tail=5, follow=False, worker=1)) == ["replica 1 up"]
    stream = slurm_backend.stream_logs(service, tail=5, follow=True, worker=None, until=time.monotonic() + 60)
    assert sorted([next(stream), next(stream)]) == ["[worker 0] replica 0 up", "[worker 1] replica 1 up"]
    local_slurm.run("scancel", f"--name={name}")
    started = time.monotonic()
    rest = list(stream)  # cancelled: the stream ends with the array
    assert time.monotonic() - started < 20
    # What follows the cancel is what the tasks' files got last: slurmstepd's note of it ("*** JOB 14 ON gpu-01
    # CANCELLED AT ... ***", one per task as a rule), and not always only that: once in a suite run on a loaded
    # machine another line came too. Never a line the stream had sent already.
    assert any("CANCELLED AT" in line for line in rest), rest
    assert not any(line.endswith(" up") for line in rest), rest
    assert {line.split("]")[0] for line in rest} <= {"[worker 0", "[worker 1"}
