"""gpuc end to end: the command line as a real process against the live test server and a real Celery worker.

`gpuc(...)` runs `python -m gpuc` (PYTHONPATH=cli: the package is not installed in the test environment) with an
environment of its own: PATH, HOME (a temporary directory), GPUC_URL, GPUC_TOKEN, GPUC_CONFIG, nothing of the test
run's. While it runs, `while_waiting` is called about every half second: that is the world around the console
(simulated minutes passing on the cluster, beat's workloads tick sent to the worker, another person's command).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.utils.celery_worker import live_celery, worker  # noqa: F401  (fixtures)
from tests.utils.personas import Personas, build_personas
from tests.workloads.conftest import build_fleet, training_spec

CLI_DIR = Path(__file__).resolve().parents[2] / "cli"


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    args: tuple = ()

    def json(self):
        return json.loads(self.stdout)

    def __str__(self) -> str:  # what an assertion message shows
        return (
            f"gpuc {' '.join(map(str, self.args))} -> {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


@dataclass
class Gpuc:
    """Runs the command line against one console, as one user."""

    url: str
    token: str | None
    home: Path
    calls: list[Result] = field(default_factory=list)

    def env(self, **extra: str | None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "PYTHONPATH": str(CLI_DIR),
            "PYTHONDONTWRITEBYTECODE": "1",
            "GPUC_CONFIG": str(self.home / "gpuc-config.json"),
            "GPUC_URL": self.url,
            # Retries back off from 50 ms here (0.5 s by default), so that a retried request costs the suite little.
            "GPUC_RETRY_BASE_S": "0.05",
        }
        if self.token:
            env["GPUC_TOKEN"] = self.token
        for key, value in extra.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def __call__(
        self,
        *args: object,
        env: dict[str, str] | None = None,
        while_waiting: Callable[[], None] | None = None,
        stdin: str | None = None,
        timeout: float = 120.0,
    ) -> Result:
        command = [sys.executable, "-m", "gpuc", *map(str, args)]
        process = subprocess.Popen(
            command,
            env=self.env() if env is None else env,
            cwd=str(self.home),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + timeout
        pending_input = stdin
        while True:
            try:
                stdout, stderr = process.communicate(input=pending_input, timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pending_input = None  # communicate() sent it already; a second call must not
                if time.monotonic() > deadline:
                    process.kill()
                    stdout, stderr = process.communicate()
                    raise AssertionError(f"gpuc {args} ran over {timeout} s:\n{stdout}\n{stderr}") from None
                if while_waiting is not None:
                    while_waiting()
        result = Result(process.returncode, stdout, stderr, args)
        self.calls.append(result)
        return result


@dataclass
class Console:
    personas: Personas
    fleet: dict
    url: str


@pytest.fixture
def console(request, transactional_db, live_server) -> Console:
    """Tenant A's queue `train` with 16 guaranteed H100 on the simulated cluster `sim` (4 nodes × 8 GPUs, half H100),
    committed so that the live server's thread and the worker see it."""
    request.getfixturevalue("live_celery")
    personas = build_personas()
    return Console(personas=personas, fleet=build_fleet(personas), url=live_server.url)


@pytest.fixture
def gpuc(console, tmp_path) -> Gpuc:
    """gpuc as tenant A's CI service account (ci-a, a member token on A), in a home directory of its own."""
    home = tmp_path / "home"
    home.mkdir()
    return Gpuc(url=console.url, token=console.personas.token_a_raw, home=home)


def write_job(directory: Path, name: str = "ci-smoke", *, as_json: bool = False, **overrides) -> Path:
    """A job file as a pipeline keeps it: the body POST /api/v1/workloads/ takes, in YAML (or JSON)."""
    import yaml

    spec = training_spec(**{"name": name, "gpus_per_worker": 1, "max_runtime_s": 600, **overrides})
    body = {"kind": "training", "spec": spec}
    path = directory / (f"{name}.json" if as_json else f"{name}.yaml")
    path.write_text(json.dumps(body) if as_json else yaml.safe_dump(body, sort_keys=False))
    return path


class TimePasses:
    """What passes around a waiting pipeline: simulated minutes on the cluster (each run takes its whole runtime
    limit and does not fail: tests/utils/simulator.py; but the runs of the workloads named in `overrunning` need
    twice their limit, which stops them: timed out, a failed workload), then beat's workloads tick, sent to the real
    worker at most once a second (beat sends it every 10 s)."""

    def __init__(self, cluster, minutes: float = 3.0, overrunning: tuple[str, ...] = ()) -> None:
        self.cluster = cluster
        self.minutes = minutes
        self.overrunning = overrunning
        self.sent_at = 0.0

    def __call__(self) -> None:
        from apps.backends.models import SimWorkload
        from apps.backends.simulator.services import advance_time
        from apps.workloads.models import Workload
        from apps.workloads.tasks import workloads_tick_task
        from tests.utils.simulator import overruns, runs_to_the_end

        runs_to_the_end()
        for workload in Workload.objects.filter(name__in=self.overrunning).exclude(backend_name=""):
            if SimWorkload.objects.filter(name=workload.backend_name, state__in=["pending", "running"]).exists():
                overruns(workload)  # before the minutes pass: its limit is 10 minutes at least
        advance_time(None, self.cluster, self.minutes)
        if time.monotonic() - self.sent_at >= 1.0:
            workloads_tick_task.delay()
            self.sent_at = time.monotonic()
