"""Reading logs as lines, for the backends' `stream_logs`: bytes cut into lines, and several workers' logs
followed at once, each read on a thread of its own and merged as their lines arrive.

Only the reading happens on those threads (an HTTP response, a pipe from `tail`): never the database, and never
after the merge has returned, since it stops and joins them on every way out (the end, the time limit, an error,
the caller closing the stream).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

_END = object()  # a feed's last item: it has nothing more


def lines_of(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a byte stream as they complete (UTF-8, an undecodable byte as U+FFFD), without their newline
    (nor a carriage return before it); a last line without a newline is given when the stream ends. Empty lines
    are kept: they are part of the log."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            yield raw.removesuffix(b"\r").decode("utf-8", errors="replace")
    if pending:
        yield pending.removesuffix(b"\r").decode("utf-8", errors="replace")


class Closing:
    """Lines whose `close()` also runs `cleanup`: for a read opened before the first line is asked for, which
    must be closed even if the lines are never read (a generator that never started runs no `finally`)."""

    def __init__(self, lines: Iterator[str], cleanup: Callable[[], None]):
        self._lines = lines
        self._cleanup = cleanup

    def __iter__(self) -> Closing:
        return self

    def __next__(self) -> str:
        return next(self._lines)

    def close(self) -> None:
        try:
            close = getattr(self._lines, "close", None)
            if close is not None:
                close()
        finally:
            self._cleanup()


@dataclass
class Feed:
    """One worker's log: `read()` gives its lines, blocking while it waits for more; `stop()` makes a blocked
    `read()` end from another thread (it shuts down the socket or ends the process it reads)."""

    prefix: str
    read: Callable[[], Iterator[str]]
    stop: Callable[[], None]


def merged(
    feeds: list[Feed],
    *,
    until: float | None = None,
    ended: Callable[[], bool] | None = None,
    poll_s: float = 2.0,
    grace_s: float = 1.0,
) -> Iterator[str]:
    """The lines of every feed, each with its feed's prefix, in the order they arrive, until every feed has ended,
    `until` (a `time.monotonic()` value) passes, or `ended()` (asked every `poll_s` seconds) says the workload
    stopped: then what arrives within `grace_s` more (the last lines flushed), and the feeds are stopped.

    A feed that raises ends the merge with its error, after the lines read before it."""
    found: queue.Queue = queue.Queue(maxsize=10_000)  # a slow reader of the stream slows the feeds down
    stopping = threading.Event()

    def pump(feed: Feed) -> None:
        try:
            for line in feed.read():
                if stopping.is_set():
                    return
                found.put((feed, line))
        except Exception as exc:  # handed to the merge, which raises it in the caller's thread
            if not stopping.is_set():
                found.put((feed, exc))
        finally:
            # Never blocks for long: the merge drains the queue until every feed has said it ended.
            with contextlib.suppress(queue.Full):
                found.put((feed, _END), timeout=5)

    threads = [threading.Thread(target=pump, args=(feed,), name="log-feed", daemon=True) for feed in feeds]
    for thread in threads:
        thread.start()
    running = len(feeds)
    stop_at = until
    next_check = time.monotonic() + poll_s
    try:
        while running:
            now = time.monotonic()
            if stop_at is not None and now >= stop_at:
                return
            if ended is not None and now >= next_check:
                next_check = now + poll_s
                if ended():
                    ended = None
                    stop_at = min(stop_at, now + grace_s) if stop_at is not None else now + grace_s
            wait = next_check - now if ended is not None else poll_s
            if stop_at is not None:
                wait = min(wait, stop_at - now)
            try:
                feed, item = found.get(timeout=max(wait, 0.01))
            except queue.Empty:
                continue
            if item is _END:
                running -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield feed.prefix + item
    finally:
        stopping.set()
        for feed in feeds:
            with contextlib.suppress(Exception):
                feed.stop()
        # Unblock a pump waiting on a full queue, then wait for the threads (a stopped feed ends at once).
        deadline = time.monotonic() + 5
        for thread in threads:
            while thread.is_alive() and time.monotonic() < deadline:
                with contextlib.suppress(queue.Empty):
                    while True:
                        found.get_nowait()
                thread.join(timeout=0.05)
