"""Celery beat, highly available: real `celery beat` processes on PostgreSQL and Redis, one sending at a time.

Three beat processes run the leased scheduler (apps/operations/beat.py) with a 3 s lease against the test database.
A periodic task due every second sends to a queue of its own, and nobody consumes it: the queue, read in order, is
the record of who sent what (each message's `origin` header names the sending process, `gpuc_sent_at` its time).
The test kills the active one (SIGKILL), freezes the next (SIGSTOP), thaws it (SIGCONT) and kills the third, and
checks after each step that exactly one process sends, who it is, and how soon it took over.

`test_without_the_lease_two_send` runs the same observation on django-celery-beat's own DatabaseScheduler, to show
that the check fails when the lease is bypassed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 3
# A standby tries every third of a lease, and the probe is due every second: a takeover is seen at most this long
# after the active process stopped renewing.
TAKEOVER_S = LEASE_S + LEASE_S / 3 + 1.0
START_TIMEOUT_S = 60.0  # a cold start imports Django and every app; slow on a busy 2-core machine


class Beats:
    """Beat processes started by the test, and what they sent, in order."""

    def __init__(self, tmp_path: Path, queue: str, scheduler: str) -> None:
        self.tmp_path = tmp_path
        self.queue = queue
        self.scheduler = scheduler
        self.procs: dict[int, subprocess.Popen] = {}
        self.redis = redis.Redis.from_url(settings.CELERY_BROKER_URL)

    def start(self, count: int) -> list[int]:
        db = connection.settings_dict
        auth = quote(db["USER"]) + (f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else "")
        env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
            "BEAT_LEASE_S": str(LEASE_S),
            "DJANGO_SETTINGS_MODULE": "console.settings",
        }
        started = []
        for _ in range(count):
            n = len(self.procs)
            log = (self.tmp_path / f"beat-{n}.log").open("w")
            command = [sys.executable, "-m", "celery", "-A", "console", "beat", "--loglevel", "INFO"]
            command += ["--scheduler", self.scheduler, "--pidfile=", "--schedule", str(self.tmp_path / f"s{n}")]
            proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            self.procs[proc.pid] = proc
            started.append(proc.pid)
        return started

    def sent(self) -> list[tuple[int, float]]:
        """(sender pid, sent at) of every probe message, oldest first (Kombu pushes on the left)."""
        out = []
        for raw in reversed(self.redis.lrange(self.queue, 0, -1)):
            headers = json.loads(raw)["headers"]
            origin = headers["origin"]  # "gen<pid>@<host>"
            out.append((int(origin[3:].split("@")[0]), float(headers["gpuc_sent_at"])))
        return out

    def wait_for(self, what: str, predicate, timeout_s: float) -> list[tuple[int, float]]:
        deadline = time.monotonic() + timeout_s
        while True:
            sent = self.sent()
            if predicate(sent):
                return sent
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout_s:.0f} s for {what}; sent so far: {runs(sent)}\n{self.logs()}")
            time.sleep(0.1)

    def signal(self, pid: int, sig: int) -> float:
        os.kill(pid, sig)
        return time.time()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp_path.glob("beat-*.log")))

    def stop_all(self) -> None:
        for pid, proc in self.procs.items():
            if proc.poll() is None:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # The queue, and the exchange of the same name Kombu declared for it.
        self.redis.delete(self.queue, f"_kombu.binding.{self.queue}", f"_kombu.binding_permanent.{self.queue}")
        with self.redis.pipeline() as pipe:  # what the beats sent of the real schedule (health cycles, ticks...)
            for name in settings.CELERY_QUEUE_NAMES:
                pipe.delete(name)
            pipe.execute()


def runs(sent: list[tuple[int, float]]) -> list[int]:
    """The senders in order, each run of one sender's messages counted once: [a, b, a] means a, then b, then a."""
    out: list[int] = []
    for pid, _ in sent:
        if not out or out[-1] != pid:
            out.append(pid)
    return out


def sent_by(sent, pid: int, after: float = 0.0) -> int:
    return sum(1 for p, at in sent if p == pid and at > after)


@pytest.fixture
def probe_queue():
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.fail(f"needs a Redis broker; CELERY_BROKER_URL is {settings.CELERY_BROKER_URL!r} (make test sets it)")
    queue = f"beat-failover-{uuid.uuid4().hex[:8]}"
    every_second = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(name="beat-failover-probe", interval=every_second, task="beat_probe", queue=queue)
    return queue


@pytest.fixture
def beats(tmp_path, probe_queue):
    def make(scheduler: str) -> Beats:
        made.append(Beats(tmp_path, probe_queue, scheduler))
        return made[-1]

    made: list[Beats] = []
    yield make
    for group in made:  # before the database is flushed: no beat may hold a connection then
        group.stop_all()


def test_one_beat_sends_and_another_takes_over(beats):
    group = beats("apps.operations.beat:LeasedDatabaseScheduler")
    pids = set(group.start(3))

    # Exactly one of the three sends.
    sent = group.wait_for("three probe messages", lambda s: len(s) >= 3, START_TIMEOUT_S)
    assert len(runs(sent)) == 1, f"more than one beat sent: {runs(sent)}"
    first = sent[0][0]

    # Killed: another takes over within a lease, and only one of the two left.
    killed_at = group.signal(first, signal.SIGKILL)
    sent = group.wait_for("a takeover after SIGKILL", lambda s: s[-1][0] != first and len(runs(s)) >= 2, TAKEOVER_S * 2)
    second = sent[-1][0]
    took = min(at for pid, at in sent if pid == second) - killed_at
    assert took < TAKEOVER_S, f"took {took:.1f} s to take over from a killed beat"
    sent = group.wait_for("two sends of the new holder", lambda s: sent_by(s, second) >= 2, TAKEOVER_S)
    assert runs(sent) == [first, second]

    # Frozen: the third takes over within a lease.
    (third,) = pids - {first, second}
    stopped_at = group.signal(second, signal.SIGSTOP)
    sent = group.wait_for("a takeover after SIGSTOP", lambda s: sent_by(s, third) >= 1, TAKEOVER_S * 2)
    took = min(at for pid, at in sent if pid == third) - stopped_at
    assert took < TAKEOVER_S, f"took {took:.1f} s to take over from a frozen beat"

    # Thawed: it stays quiet; it would have sent about three times in these three seconds.
    thawed_at = group.signal(second, signal.SIGCONT)
    sent = group.wait_for("three sends after SIGCONT", lambda s: sent_by(s, third, after=thawed_at + 0.5) >= 3, 10)
    assert runs(sent) == [first, second, third], "the thawed beat sent while the other held the lease"

    # ... until it takes the lease again: it was standing by, not dead.
    killed_at = group.signal(third, signal.SIGKILL)
    sent = group.wait_for("the thawed beat to take over", lambda s: runs(s)[-1] == second, TAKEOVER_S * 2)
    took = min(at for pid, at in sent if pid == second and at > killed_at) - killed_at
    assert took < TAKEOVER_S, f"took {took:.1f} s to take over from a killed beat"
    # Never two at once: each handover is one clean switch from one sender to the next.
    assert runs(group.sent()) == [first, second, third, second]


def test_without_the_lease_two_send(beats):
    """The observation above catches two active schedulers: django-celery-beat's own scheduler, twice, does that."""
    group = beats("django_celery_beat.schedulers:DatabaseScheduler")
    a, b = group.start(2)
    sent = group.wait_for("both beats to send", lambda s: sent_by(s, a) >= 1 and sent_by(s, b) >= 1, START_TIMEOUT_S)
    assert len(runs(sent)) > 1
