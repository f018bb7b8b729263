"""Logs common to the backends (apps/backends/logstream.py: lines, several workers merged) and the simulator's own
(apps/backends/simulator/logs.py: its run and what its program prints, generated, followed as time passes)."""

from __future__ import annotations

import threading
import time

import pytest

from apps.backends.base import Backend, LogsNotReady, LogsUnavailable, RetryableBackendError
from apps.backends.logstream import Closing, Feed, lines_of, merged
from apps.backends.simulator import logs as simulated
from apps.backends.simulator.services import advance_time
from apps.backends.types import LogSource
from tests.backends.helpers import make_cluster, spec


def test_lines_of_keep_empty_lines_a_last_partial_line_and_bad_bytes():
    chunks = [b"one\r\ntw", b"o\n\n", b"\xe4\xb8", b"\xad\xff end"]
    assert list(lines_of(chunks)) == ["one", "two", "", "\u4e2d\ufffd end"]
    assert list(lines_of([])) == [] and list(lines_of([b"\n"])) == [""]


class Pipe:
    """A feed whose lines the test puts in; `stop()` ends a blocked read, as closing a socket does."""

    def __init__(self, prefix: str = ""):
        self.lines: list[str | Exception | None] = []
        self.cond = threading.Condition()
        self.stopped = False
        self.feed = Feed(prefix, self.read, self.stop)

    def put(self, item) -> None:
        with self.cond:
            self.lines.append(item)
            self.cond.notify_all()

    def read(self):
        while True:
            with self.cond:
                while not self.lines and not self.stopped:
                    self.cond.wait()
                if self.stopped:
                    return
                item = self.lines.pop(0)
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
            yield item

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()


def test_merged_feeds_are_prefixed_in_arrival_order_and_end_when_all_have():
    a, b = Pipe("[worker 0] "), Pipe("[worker 1] ")
    got = []
    reader = threading.Thread(target=lambda: got.extend(merged([a.feed, b.feed], until=time.monotonic() + 10)))
    reader.start()
    a.put("a1")
    _until(lambda: got == ["[worker 0] a1"])
    b.put("b1")
    _until(lambda: len(got) == 2)
    a.put(None)  # worker 0 ends; worker 1 goes on
    b.put("b2")
    _until(lambda: len(got) == 3)
    assert reader.is_alive()
    b.put(None)
    reader.join(timeout=5)
    assert got == ["[worker 0] a1", "[worker 1] b1", "[worker 1] b2"] and not reader.is_alive()


def test_merged_stops_every_feed_at_the_limit_when_ended_and_on_close():
    a = Pipe()
    started = time.monotonic()
    assert list(merged([a.feed], until=started + 0.5)) == [] and a.stopped
    assert 0.4 < time.monotonic() - started < 3
    b = Pipe()
    b.put("last words")
    finished = []
    assert list(merged([b.feed], ended=lambda: bool(finished.append(1)) or True, poll_s=0.1, grace_s=0.2)) == [
        "last words"
    ]
    assert b.stopped
    c = Pipe()
    c.put("x")
    stream = merged([c.feed], until=time.monotonic() + 30)
    assert next(stream) == "x"
    stream.close()
    assert c.stopped


def test_a_feeds_error_ends_the_merge_after_its_lines():
    a = Pipe()
    a.put("before")
    a.put(RetryableBackendError("the connection broke"))
    stream = merged([a.feed], until=time.monotonic() + 10)
    assert next(stream) == "before"
    with pytest.raises(RetryableBackendError, match="broke"):
        next(stream)
    assert a.stopped


def test_closing_runs_its_cleanup_even_when_nothing_was_read():
    cleaned = []

    def lines():
        yield "never asked for"

    Closing(lines(), lambda: cleaned.append(True)).close()
    assert cleaned == [True]


def test_a_backend_without_a_log_stream_says_so(db):
    cluster, _ = make_cluster()

    class Quiet(Backend):
        kind = "quiet"

    for name in Backend.__abstractmethods__:
        setattr(Quiet, name, lambda *a, **k: None)
    Quiet.__abstractmethods__ = frozenset()
    with pytest.raises(LogsUnavailable, match="quiet clusters cannot stream logs"):
        Quiet(cluster).stream_logs(LogSource("x", "1"), tail=10, follow=False, worker=None)


#
# The simulator
#


def _until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_simulated_service_is_read_from_each_replicas_leader(db):
    cluster, backend = make_cluster(nodes=4, gpus=8)
    # Two replicas of two nodes each: workers 0-1 are replica 0, 2-3 replica 1; the leaders are 0 and 2.
    backend.submit(spec("chat", workers=4, gang_min=2, gpus_per_worker=8, duration_s=3600))
    advance_time(None, cluster, 1)
    service = LogSource("chat", "9", kind="inference", workers=2)
    lines = list(backend.stream_logs(service, tail=3, follow=False, worker=None))
    leaders = [line for line in lines if line.startswith("[worker ")]
    assert {line.split("] ")[0] for line in leaders} == {"[worker 0", "[worker 1"}
    assert sum("INFO metrics: Avg prompt throughput" in line for line in leaders) == 6  # the last 3 of each
    every = list(backend.stream_logs(service, tail=200, follow=False, worker=None))
    assert any(line.startswith("[worker 1] ") and "worker 1 started on" in line for line in every)
    assert not any("started on" in line and line.startswith("[worker ") and "worker 2" in line for line in every)
    one = list(backend.stream_logs(service, tail=200, follow=False, worker=1))
    assert not any(line.startswith("[worker") for line in one)
    assert sum("INFO metrics" in line for line in one) == 12  # a line every 5 s of the minute
    assert one == list(backend.stream_logs(service, tail=200, follow=False, worker=1))  # the same log each time


def test_a_simulated_job_followed_gets_lines_as_time_passes_and_its_requeue(db, monkeypatch):
    monkeypatch.setattr(simulated, "POLL_S", 0.02)
    cluster, backend = make_cluster(nodes=2, gpus=8)
    backend.submit(spec("train", workers=1, gpus_per_worker=8, duration_s=600))
    source = LogSource("train", "5")
    stream = backend.stream_logs(source, tail=0, follow=True, worker=None, until=time.monotonic() + 30)
    advance_time(None, cluster, 1)
    steps = [next(stream) for _ in range(5)]  # tail 0: its start was before the stream, only new lines come
    assert [line.split(" ", 1)[1].split(":")[0] for line in steps] == [f"step {i}" for i in range(1, 6)]
    node = backend.status(["train"])["train"].placements[0].node
    backend.drain(node, "maintenance")  # requeued: a stop, the reason; it waits for a node
    rest = []
    for line in stream:
        rest.append(line)
        if "waiting" in line or "drain" in line:
            break
    assert any("worker 0 stopped on" in line for line in rest)
    backend.resume(node)
    advance_time(None, cluster, 20)  # started again, and past its end
    tail = list(stream)
    assert any("worker 0 started on" in line for line in tail)
    assert any(" step 1:" in line for line in tail)  # its program starts over
    assert tail[-1].split(" ", 1)[1].startswith("succeeded")


def test_a_workload_the_simulation_does_not_know_is_not_ready(db):
    _, backend = make_cluster()
    with pytest.raises(LogsNotReady, match="not in the simulation"):
        backend.stream_logs(LogSource("ghost", "1"), tail=10, follow=False, worker=None)
