"""A simulated workload's log: its run as the simulation records it, and what its program prints while it runs.

The record is the simulation's own tables: the workload's history (submitted, started, requeued, how it ended)
and each worker's allocations (started on a node's GPUs, stopped). While a worker runs, its program prints a line
every few simulated seconds: a training worker its step and loss, an inference replica's leader the engine's
throughput (vLLM's periodic stats line). Those lines are generated from the workload's name, the worker and the
step alone, so nothing is stored and every read gives the same log; they appear as simulated time passes (real
time plus what `simulate advance` adds).

Following polls the tables every `POLL_S` of real time and sends what is new; it ends once the workload has
finished (a run whose end time has passed is finished by ticking the simulation, as any backend call would).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from apps.backends.base import LogsNotReady
from apps.backends.simulator.models import ACTIVE_STATES, SimAllocation, SimCluster, SimEvent, SimWorkload
from apps.backends.simulator.seeding import stable_hash, unit
from apps.backends.types import LogSource

NCCL_LABEL = "sim/nccl"  # the network the run's NCCL reports using (backend.nccl_label sets it at submission)
POLL_S = 1.0  # real seconds between two looks at the simulation while following
STEP_S = {"training": 3, "inference": 5}  # simulated seconds between two lines of a running worker's program


def _stamp(when: datetime) -> str:
    return when.isoformat(timespec="seconds")


def program_line(kind: str, name: str, worker: int, run: int, step: int) -> str:
    """What worker `worker` of `name` prints at its `step`-th interval of run `run` (deterministic)."""
    h = stable_hash("log", name, worker, run, step)
    if kind == "inference":
        running = int(4 + 28 * unit(h, 0))
        waiting = int(3 * unit(h, 8) ** 4)
        generation = running * (55 + 30 * unit(h, 16))
        prompt = generation * (0.4 + 0.5 * unit(h, 24))
        kv = min(99.0, running * 2.6 + 10 * unit(h, 32))
        return (
            f"INFO metrics: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: "
            f"{generation:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: "
            f"{kv:.1f}%"
        )
    loss = 1.8 + 8.5 / math.sqrt(1 + step / 20) + 0.08 * (unit(h, 0) - 0.5)
    throughput = 410 + 60 * unit(h, 8)
    return f"step {step}: loss {loss:.4f}, {throughput:.1f} samples/s, rank {worker}"


@dataclass(order=True)
class _Entry:
    at: datetime
    order: int  # at one instant: a worker stopping, the job's lines, a worker starting, its program
    worker: int  # -1: the whole job's
    text: str = field(compare=False)


class SimulatedLog:
    """One read (or follow) of a simulated workload's log."""

    def __init__(self, cluster, source: LogSource, worker: int | None):
        self.cluster = cluster
        self.source = source
        self.asked = worker
        self.step_s = STEP_S.get(source.kind, STEP_S["training"])
        found = SimWorkload.objects.filter(sim__cluster=cluster, name=source.name).first()
        if found is None:
            raise LogsNotReady(f"{source.name} is not in the simulation of cluster {cluster.name}")
        self.workload = found
        # What its NCCL reports using between nodes (backend.nccl_label): printed as each worker starts.
        self.nccl = ((found.spec or {}).get("labels") or {}).get(NCCL_LABEL, "")
        # An inference replica's pods are a gang of `gang_min` workers; its log is its first one's (the leader).
        self.gang = int((found.spec or {}).get("gang_min") or 1) if source.kind == "inference" else 1
        self.last_event = 0  # SimEvent ids sent
        self.started: set[int] = set()  # allocations whose start was sent
        self.stopped: set[int] = set()
        self.steps: dict[int, int] = {}  # allocation id -> steps sent

    # what is in the tables

    def now(self) -> datetime:
        return SimCluster.objects.get(cluster=self.cluster).sim_now()

    def _number(self, allocation: SimAllocation) -> int | None:
        """The worker number an allocation's lines go under (None: not a leader of an inference replica)."""
        if allocation.worker % self.gang:
            return None
        number = allocation.worker // self.gang
        return number if self.asked is None or number == self.asked else None

    def _allocations(self) -> list[tuple[int, int, SimAllocation]]:
        """(worker number, run, allocation) of the workers this log shows, a worker's runs numbered from 0."""
        out, runs = [], {}
        for allocation in SimAllocation.objects.filter(workload=self.workload).order_by("started_at", "id"):
            number = self._number(allocation)
            if number is not None:
                run = runs[number] = runs.get(number, -1) + 1
                out.append((number, run, allocation))
        return out

    def _step_entry(self, number: int, run: int, allocation: SimAllocation, step: int) -> _Entry:
        at = allocation.started_at + timedelta(seconds=step * self.step_s)
        text = program_line(self.source.kind, self.source.name, number, run, step)
        return _Entry(at, 2, number, f"{_stamp(at)} {text}")

    def _steps_by(self, allocation: SimAllocation, now: datetime) -> int:
        """How many program lines the allocation's worker has printed by `now`."""
        end = min(allocation.ended_at or now, now)
        seconds = (end - allocation.started_at).total_seconds()
        steps = int(seconds // self.step_s)
        if allocation.ended_at is not None and allocation.ended_at <= now and steps * self.step_s == seconds:
            steps -= 1  # the program does not print at the instant it is stopped
        return max(0, steps)

    def _entries(self, now: datetime, tail: int | None) -> list[_Entry]:
        """Every line not sent yet up to `now` (the last `tail` of each worker's and of the job's, when given),
        marked as sent."""
        job: list[_Entry] = []
        for event in SimEvent.objects.filter(workload=self.workload, id__gt=self.last_event, at__lte=now).order_by(
            "id"
        ):
            job.append(_Entry(event.at, 0, -1, f"{_stamp(event.at)} {event.text}"))
            self.last_event = event.id
        per_worker: dict[int, list[_Entry]] = {}
        for number, run, allocation in self._allocations():
            mine = per_worker.setdefault(number, [])
            if allocation.started_at > now:
                continue
            if allocation.id not in self.started:
                self.started.add(allocation.id)
                gpus = ",".join(str(i) for i in allocation.gpu_indexes)
                detail = f" ({allocation.mig_profile})" if allocation.mig_profile else ""
                text = f"worker {number} started on {allocation.node} GPUs {gpus}{detail}"
                mine.append(_Entry(allocation.started_at, 1, number, f"{_stamp(allocation.started_at)} {text}"))
                if self.nccl:
                    line = f"{_stamp(allocation.started_at)} NCCL INFO {self.nccl}"
                    mine.append(_Entry(allocation.started_at, 1, number, line))
            done, total = self.steps.get(allocation.id, 0), self._steps_by(allocation, now)
            if tail is not None:
                done = max(done, total - tail)  # only the last lines: older steps are never generated
            mine.extend(self._step_entry(number, run, allocation, step) for step in range(done + 1, total + 1))
            self.steps[allocation.id] = total
            if allocation.ended_at and allocation.ended_at <= now and allocation.id not in self.stopped:
                self.stopped.add(allocation.id)
                text = f"worker {number} stopped on {allocation.node}"
                mine.append(_Entry(allocation.ended_at, -1, number, f"{_stamp(allocation.ended_at)} {text}"))
        if tail is not None:
            job = job[len(job) - tail :] if tail else []
            per_worker = {n: sorted(e)[len(e) - tail :] if tail else [] for n, e in per_worker.items()}
        return list(heapq.merge(job, *(sorted(e) for e in per_worker.values())))

    def _line(self, entry: _Entry) -> str:
        if entry.worker < 0:
            return entry.text
        return self.source.prefix(entry.worker, self.asked) + entry.text

    # reading

    def read(self, tail: int) -> Iterator[str]:
        entries = self._entries(self.now(), tail)
        return (self._line(e) for e in entries)

    def follow(self, tail: int, until: float | None, finish) -> Iterator[str]:
        """The tail, then new lines every POLL_S until the workload has finished (or `until`). `finish()` ticks the
        simulation, so a run whose end time has passed is recorded as ended."""
        first = self._entries(self.now(), tail)

        def lines() -> Iterator[str]:
            yield from (self._line(e) for e in first)
            while until is None or time.monotonic() < until:
                time.sleep(POLL_S if until is None else max(0.0, min(POLL_S, until - time.monotonic())))
                self.workload.refresh_from_db(fields=["state", "ends_at"])
                now = self.now()
                if self.workload.state == "running" and self.workload.ends_at and self.workload.ends_at <= now:
                    finish()
                    self.workload.refresh_from_db(fields=["state", "ends_at"])
                yield from (self._line(e) for e in self._entries(now, None))
                if self.workload.state not in ACTIVE_STATES:
                    yield from (self._line(e) for e in self._entries(self.now(), None))  # its last lines
                    return

        return lines()
