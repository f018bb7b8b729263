"""A Slurm job's log: its output file, read with `tail` where the cluster's CLI runs.

The console's sbatch scripts send a job's output to `<output_dir>/<name>-<job id>.out`, and each task of an
inference service's array (one per replica) to `<name>-<array job id>_<task>.out` (`output_file`, the one place
that names them). The file is on the cluster's shared file system: the backend reads it through the same runner
as every other command, locally or on the login node over SSH (each value its own argument, quoted for the remote
shell as `Cli.argv` does), so `output_dir` must be shared with that node.

A plain read is `tail -n N -- FILE`. Following runs `tail -n N -F -- FILE` (it waits for a file that is not
there yet and follows it by name), bounded on that node by coreutils' `timeout` at the stream's limit so that a
`tail` whose SSH connection went away ends by itself; the job's state is polled with `squeue` meanwhile (`tail
--pid` cannot help: the job runs on a compute node, not where tail runs), and once the job has left the
running states, what it wrote last is sent and the stream ends.

The job is the newest one of the workload's name that the controller holds (`squeue --states=all`), else the
newest in accounting (`sacct`). A training job's ranks write to one file (srun merges their output), so its log is
worker 0's; an inference service's replica K is its array's task K.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

from apps.backends.base import LogsNotReady, LogWorkerError, PermanentBackendError
from apps.backends.logstream import Closing, Feed, lines_of, merged
from apps.backends.render.workload.slurm import output_file
from apps.backends.slurm import parse
from apps.backends.slurm.cli import Cli
from apps.backends.slurm.settings import SlurmSettings
from apps.backends.types import BackendState, LogSource

POLL_S = 2.0  # how often a followed job's state is read
GRACE_S = 1.5  # after the job ended: the last lines its file gets (slurmd flushes them at the end)
READ_BYTES = 64 * 1024
NO_FILE = "no such file or directory"
TIMED_OUT = 124  # coreutils timeout's status when it ended the command: the stream's limit
# Follows file $2 from its last $1 lines until its own stdin closes (when the console stops the stream, or the SSH
# connection to the login node goes), then stops tail. A constant: the values are its arguments.
FOLLOW_SCRIPT = 'tail -n "$1" -F -- "$2" & tail_pid=$!; cat >/dev/null; kill "$tail_pid"'


@dataclass(frozen=True)
class Task:
    """One output file of the job: the whole job's, or one array task's."""

    number: int  # the worker it is (an array task's index; 0 for a plain job)
    job: str  # Slurm's id of what writes it: "42", or "42_3" for an array's task
    state: str  # Slurm's state word (RUNNING, COMPLETED, PENDING ...)

    @property
    def backend_state(self) -> BackendState:
        return parse.JOB_STATES.get(self.state.split()[0] if self.state else "", BackendState.UNKNOWN)


class JobLogs:
    """The output files of one workload's newest job on one cluster."""

    def __init__(self, cli: Cli, settings: SlurmSettings, source: LogSource):
        self.cli = cli
        self.settings = settings
        self.source = source

    # finding the job

    def tasks(self) -> list[Task]:
        """The newest job of the workload's name, as its tasks: from the controller, else from accounting."""
        argv = ["squeue", "--noheader", "--states=all", f"--name={self.source.name}", "--format=%F|%K|%T"]
        found: dict[int, list[Task]] = {}
        for line in self.cli.run(argv).splitlines():
            base, index, state = [*line.strip().split("|"), "", ""][:3]
            if not base.isdigit():
                continue
            if index.isdigit():
                found.setdefault(int(base), []).append(Task(int(index), f"{base}_{index}", state))
            elif index in ("N/A", ""):
                found.setdefault(int(base), []).append(Task(0, base, state))
            else:  # an array's tasks not started yet ("0-3", "[1-3%2]"): no file of theirs exists
                found.setdefault(int(base), [])
                found[int(base)].append(Task(-1, base, state))
        if not found:
            found = self._accounted()
        if not found:
            raise LogsNotReady(f"Slurm has no job named {self.source.name} (not submitted yet, or forgotten)")
        return sorted(found[max(found)], key=lambda t: t.number)

    def _accounted(self) -> dict[int, list[Task]]:
        argv = [
            "sacct",
            "-X",
            "-n",
            "-P",
            "-a",
            f"--name={self.source.name}",
            "-S",
            "now-30days",
            "--format=JobID,State",
        ]
        found: dict[int, list[Task]] = {}
        for line in self.cli.run(argv).splitlines():
            job, state = [*line.strip().split("|"), ""][:2]
            base, _, index = job.partition("_")
            if base.isdigit() and (index.isdigit() or not index):
                found.setdefault(int(base), []).append(Task(int(index or 0), job, state))
        return found

    def path(self, task: Task) -> str:
        return output_file(self.settings.output_dir, self.source.name, task.job)

    def chosen(self, tasks: list[Task], worker: int | None) -> list[Task]:
        array = any("_" in t.job for t in tasks)
        if worker is not None and worker > 0 and not array:
            raise LogWorkerError(
                f"Slurm job {tasks[0].job} writes one output file for all its ranks (srun merges them): its log "
                "is worker 0's"
            )
        started = [t for t in tasks if t.number >= 0 and t.backend_state != BackendState.PENDING]
        if worker is not None and array:
            started = [t for t in started if t.number == worker]
        if not started:
            what = f"task {worker} of Slurm job" if worker is not None and array else "Slurm job"
            raise LogsNotReady(f"{what} {tasks[0].job.partition('_')[0]} ({self.source.name}) has not started yet")
        return started

    def _prefix(self, task: Task, worker: int | None, tasks: list[Task]) -> str:
        if not any("_" in t.job for t in tasks):
            return ""  # one file for the whole gang: its lines are not one worker's
        return self.source.prefix(task.number, worker)

    # reading

    def stream(self, *, tail: int, follow: bool, worker: int | None, until: float | None) -> Iterator[str]:
        tasks = self.tasks()
        chosen = self.chosen(tasks, worker)
        running = [t for t in chosen if t.backend_state == BackendState.RUNNING]
        if follow and running:
            return self._follow(chosen, tasks, tail, worker, until)
        return self._read(chosen, tasks, tail, worker)

    def _missing(self, task: Task, result: subprocess.CompletedProcess) -> PermanentBackendError:
        path = self.path(task)
        if task.backend_state.finished:
            return LogsNotReady(f"the output file {path} of Slurm job {task.job} is not there any more")
        return LogsNotReady(
            f"the output file {path} of Slurm job {task.job} is not there yet (if this lasts, output_dir is not on a "
            "file system shared with where the console runs Slurm's commands)"
        )

    def _tail(self, task: Task, tail: int) -> str:
        argv = ["tail", "-n", str(tail), "--", self.path(task)]
        result = self.cli.call(argv)
        if result.returncode == 0:
            return result.stdout
        if NO_FILE in (result.stderr or "").lower():
            raise self._missing(task, result)
        raise self.cli.error(argv, result)

    def _read(self, chosen: list[Task], tasks: list[Task], tail: int, worker: int | None) -> Iterator[str]:
        first = self._tail(chosen[0], tail)  # its refusal is the whole answer's

        def lines() -> Iterator[str]:
            for position, task in enumerate(chosen):
                if position:
                    try:
                        text = self._tail(task, tail)
                    except LogsNotReady:
                        continue
                else:
                    text = first
                prefix = self._prefix(task, worker, tasks)
                for line in lines_of([text.encode()]):
                    yield prefix + line

        return lines()

    def _follow(
        self, chosen: list[Task], tasks: list[Task], tail: int, worker: int | None, until: float | None
    ) -> Iterator[str]:
        for task in chosen:
            exists = self.cli.call(["test", "-e", self.path(task)])
            if exists.returncode not in (0, 1):
                raise self.cli.error(["test"], exists)
            if exists.returncode == 1 and len(chosen) == 1:
                raise self._missing(task, exists)
        feeds = [self._feed(task, tail, until, self._prefix(task, worker, tasks)) for task in chosen]
        base = chosen[0].job.partition("_")[0]
        lines = merged(feeds, until=until, ended=lambda: self._ended(base), poll_s=POLL_S, grace_s=GRACE_S)
        # Closed unread, the merge never starts (nor its `finally`): the tails started here are stopped all the same.
        return Closing(lines, lambda: [feed.stop() for feed in feeds])

    def _feed(self, task: Task, tail: int, until: float | None, prefix: str) -> Feed:
        # `tail -F` until this process closes its stdin: over SSH that is when the connection goes (sshd closes the
        # remote command's stdin), so no tail outlives the stream on the login node. The script is a constant; the
        # line count and the path reach it as its own arguments ($1, $2), never as shell text.
        argv = ["sh", "-c", FOLLOW_SCRIPT, "sh", str(tail), self.path(task)]
        if until is not None:
            # The stream's limit, on the node where tail runs: timeout ends the whole process group there.
            argv = ["timeout", str(max(1, math.ceil(until - time.monotonic()) + 5)), *argv]
        try:
            process = subprocess.Popen(  # noqa: S603  (an argument vector, no shell)
                self.cli.argv(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                # tail -F's notes ("has appeared; following new file") are not the log: read only if it fails.
                stderr=subprocess.PIPE,
                env=self.cli.env(),
                start_new_session=True,  # its own process group: stopping it stops everything it started here
            )
        except FileNotFoundError as exc:
            raise PermanentBackendError(f"{exc.filename} is not installed where the console runs") from exc
        stopped = []

        def read() -> Iterator[str]:
            yield from lines_of(iter(lambda: process.stdout.read1(READ_BYTES), b""))
            code = process.wait()
            if not stopped and code not in (0, TIMED_OUT):  # ssh or tail failed, not the end we asked for
                errors = process.stderr.read().decode(errors="replace")
                raise self.cli.error(argv, subprocess.CompletedProcess(argv, code, "", errors))

        def stop() -> None:
            stopped.append(True)
            with contextlib.suppress(OSError):
                process.stdin.close()  # the script's cat ends, and with it tail (over SSH: the connection)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
            process.stdout.close()
            process.stderr.close()

        return Feed(prefix, read, stop)

    def _ended(self, base: str) -> bool:
        """Whether job `base` (all its tasks) has left the running and pending states; a job the controller no
        longer holds has ended."""
        result = self.cli.call(["squeue", "--noheader", "--states=all", f"--jobs={base}", "--format=%T"])
        if result.returncode != 0:
            return "invalid job id" in (result.stderr or "").lower()
        states = [parse.JOB_STATES.get(word.strip(), BackendState.UNKNOWN) for word in result.stdout.split()]
        return not any(state in (BackendState.PENDING, BackendState.RUNNING) for state in states)
