"""Waiting for a workload (or an operation) to finish, with a progress line on stderr.

On a terminal the line updates in place (state, the reason it waits, time so far); in a CI log, where carriage
returns make a mess, a line is written only when the state or its reason changes.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

from gpuc.errors import FINAL_STATES, TIMED_OUT, GpucError

OPERATION_FINAL = {"succeeded", "failed"}


class Progress:
    def __init__(self, out: TextIO | None = None, tty: bool | None = None, clock=time.monotonic) -> None:
        self.out = out or sys.stderr
        self.tty = self.out.isatty() if tty is None else tty
        self.clock = clock
        self.start = clock()
        self.last: tuple | None = None
        self.width = 0

    def show(self, label: str, state: str, reason: str = "") -> None:
        elapsed = int(self.clock() - self.start)
        text = f"{label}: {state}" + (f": {reason}" if reason else "")
        if self.tty:
            line = f"[{elapsed // 60:d}:{elapsed % 60:02d}] {text}"
            columns = _columns()
            if len(line) > columns - 1:
                line = line[: columns - 2] + "…"
            self.out.write("\r" + line + " " * max(0, self.width - len(line)))  # blank what a longer line left
            self.width = len(line)
            self.out.flush()
        elif (state, reason) != self.last:
            self.out.write(f"[{elapsed}s] {text}\n")
            self.out.flush()
        self.last = (state, reason)

    def done(self) -> None:
        if self.tty and self.width:
            self.out.write("\n")
            self.out.flush()
            self.width = 0


def _columns() -> int:
    import shutil

    return shutil.get_terminal_size((100, 24)).columns


def reason_of(workload: dict) -> str:
    """The words the workload page shows next to the state: its state_reason, else the admission's reason."""
    reason = workload.get("state_reason") or ""
    if not reason and workload.get("state") == "pending":
        reason = (workload.get("admission") or {}).get("reason") or ""
    return reason


def wait_for_workload(
    fetch: Callable[[], dict],
    *,
    timeout_s: float | None,
    interval_s: float,
    progress: Progress,
    sleep: Callable[[float], None] = time.sleep,
    clock=time.monotonic,
    deadline: float | None = None,
    stop: Callable[[dict], bool] | None = None,
) -> dict:
    """Poll until the workload reaches a final state (or `stop` says so); return it. Past the deadline (`timeout_s`
    from now, or `deadline` on `clock`), raise with exit code 3."""
    if deadline is None and timeout_s is not None:
        deadline = clock() + timeout_s
    while True:
        workload = fetch()
        label = f"#{workload.get('id')} {workload.get('name')}"
        progress.show(label, workload.get("state", "?"), reason_of(workload))
        if workload.get("state") in FINAL_STATES or (stop is not None and stop(workload)):
            progress.done()
            return workload
        if deadline is not None and clock() >= deadline:
            progress.done()
            raise GpucError(
                f"timed out after {timeout_s:g} s waiting for workload #{workload.get('id')} "
                f"({workload.get('state')}); it was left as it is (cancel it with `gpuc cancel {workload.get('id')} "
                "--reason ...`)",
                TIMED_OUT,
            )
        sleep(interval_s if deadline is None else max(0.0, min(interval_s, deadline - clock())))


def wait_for_operation(
    fetch: Callable[[], dict],
    *,
    timeout_s: float | None,
    interval_s: float,
    progress: Progress,
    sleep: Callable[[float], None] = time.sleep,
    clock=time.monotonic,
) -> dict:
    deadline = None if timeout_s is None else clock() + timeout_s
    while True:
        op = fetch()
        steps = ""
        if op.get("steps_total"):
            steps = f"{op.get('steps_done')} of {op.get('steps_total')} {op.get('steps_label') or ''}".strip()
        progress.show(f"operation #{op.get('id')} {op.get('kind')}", op.get("status", "?"), steps)
        if op.get("status") in OPERATION_FINAL:
            progress.done()
            return op
        if deadline is not None and clock() >= deadline:
            progress.done()
            raise GpucError(
                f"timed out after {timeout_s:g} s waiting for operation #{op.get('id')} ({op.get('status')}); "
                "it goes on in the console",
                TIMED_OUT,
            )
        sleep(interval_s if deadline is None else max(0.0, min(interval_s, deadline - clock())))
