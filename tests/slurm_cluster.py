"""The real local Slurm cluster (scripts/slurm-local.sh) as a session fixture for every Slurm test.

`make test` starts the cluster around pytest (scripts/with-slurm.sh) and exports SLURM_CONF and
SLURM_RESTD_URL. Run directly, pytest starts it here and stops it at the end. Either way a cluster that
cannot be started fails the Slurm tests loudly: they never skip.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "slurm-local.sh"
# `torchrun` for the console's training scripts: runs the command after its `--`, as torchrun --no-python
# would (there is no PyTorch on this machine).
TORCHRUN = '#!/bin/sh\nwhile [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n'


@dataclass(frozen=True)
class LocalSlurm:
    conf: str  # SLURM_CONF
    restd_url: str  # slurmrestd, JWT auth
    jobs_dir: str  # a directory every job can write its output to

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=check, env=self.env())

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": self.conf}

    def token(self, user: str = "root", lifespan_s: int = 3600) -> str:
        out = self.run("scontrol", "token", f"username={user}", f"lifespan={lifespan_s}").stdout.strip()
        return out.removeprefix("SLURM_JWT=")

    def stand_ins(self) -> str:
        """A directory for the jobs' PATH holding the torchrun stand-in (the jobs directory is on every node)."""
        bin_dir = Path(self.jobs_dir) / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        torchrun = bin_dir / "torchrun"
        if not torchrun.exists() or torchrun.read_text() != TORCHRUN:
            torchrun.write_text(TORCHRUN)
        torchrun.chmod(0o755)
        return str(bin_dir)

    def script(self, command: str) -> subprocess.CompletedProcess:
        """scripts/slurm-local.sh <command>: start is idempotent (starts only what is not running)."""
        return subprocess.run([str(SCRIPT), command], capture_output=True, text=True, timeout=600)


def _answers() -> bool:
    if not os.environ.get("SLURM_CONF"):
        return False
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return ping.returncode == 0 and "is UP" in ping.stdout


def _exports(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            name, _, value = line.removeprefix("export ").partition("=")
            found[name] = value
    return found


def _clean_slate(cluster: LocalSlurm) -> None:
    """Nothing left from an earlier, interrupted run: no jobs, every node back in service, no SPANK plugin a test
    loaded (tests/backends/slurm/test_pyxis.py) still in the plugin stack."""
    for loaded in (Path(cluster.conf).parent / "plugstack.conf.d").glob("*.conf"):
        loaded.unlink(missing_ok=True)
    cluster.run("scancel", "--user=root", "--full", check=False)
    nodes = cluster.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split("\n")
    stuck = sorted({line.split()[0] for line in nodes if line.strip() and line.split()[1] not in ("idle", "mixed")})
    for node in stuck:
        cluster.run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)


@pytest.fixture(scope="session")
def local_slurm():
    """The running local cluster; started (and stopped at the end) when nothing answers yet."""
    started = False
    if not _answers():
        was_up = subprocess.run([str(SCRIPT), "status"], capture_output=True, timeout=60).returncode == 0
        result = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=900)
        if result.returncode != 0:
            pytest.fail(f"the local Slurm cluster did not start:\n{result.stdout}\n{result.stderr}", pytrace=False)
        os.environ.update(_exports(result.stdout))
        started = not was_up
        if not _answers():
            pytest.fail("the local Slurm cluster started but scontrol ping does not answer", pytrace=False)
    conf = os.environ["SLURM_CONF"]
    cluster = LocalSlurm(
        conf=conf,
        restd_url=os.environ.get("SLURM_RESTD_URL", "http://127.0.0.1:6820"),
        jobs_dir=str(Path(conf).parent.parent / "jobs"),
    )
    _clean_slate(cluster)
    yield cluster
    if started:
        subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, timeout=120)
