"""A `slurm` cluster (console side) over the real local Slurm cluster, and helpers for its tests.

Every test shares the one local cluster (gpu-[01-04] x 8 a100): jobs carry unique names, tests cancel what
they submit and resume the nodes they touch, also when they fail.
"""

from __future__ import annotations

import contextlib
import time
import uuid

import pytest

from apps.backends.slurm.backend import SlurmBackend
from apps.backends.types import WorkloadSpec
from apps.fleet.models import Cluster
from tests.backends.console_specs import console_spec
from tests.sshd_login_node import ssh_login_node  # noqa: F401  (the login node of the SSH mode tests)

NODES = ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]


def connection(local_slurm, **extra) -> dict:
    return {
        "slurm_cluster": "gpuc",
        "slurm_conf": local_slurm.conf,
        "output_dir": local_slurm.jobs_dir,
        "partition": "gpu",
        "job_path": f"{local_slurm.stand_ins()}:/usr/local/bin:/usr/bin:/bin",  # torchrun's stand-in first
        "containers": "none",  # no pyxis here: jobs run on the nodes' own software (the spec's image unused)
        **extra,
    }


def sleep_spec(name: str, seconds: int = 2, **fields) -> WorkloadSpec:
    """The console's training script running `sleep` (torchrun is a stand-in on the jobs' PATH), as account root
    with QOS normal, which the local cluster has."""
    fields.setdefault("gpu_model", "a100")
    return console_spec(
        name,
        tenant="t",
        command=["sleep", str(seconds)],
        max_runtime_s=seconds + 120,
        tier="normal",
        slurm_account="root",
        **fields,
    )


@pytest.fixture
def slurm_backend(local_slurm) -> SlurmBackend:
    return SlurmBackend(Cluster(name="gpuc", kind="slurm", connection=connection(local_slurm)))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(check, what: str, timeout: float = 60.0, poll: float = 0.3):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(poll)


@pytest.fixture
def cleanup(local_slurm):
    """Names of jobs to cancel and nodes to resume at teardown (whoever drained them)."""
    jobs: list[str] = []
    nodes: set[str] = set()
    yield jobs, nodes
    for name in jobs:
        with contextlib.suppress(Exception):
            local_slurm.run("scancel", f"--name={name}", check=False)
    for node in sorted(nodes):
        local_slurm.run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
