"""The Backend contract against the real local Slurm cluster (4 nodes x 8 a100), with short `sleep` jobs in the
sbatch scripts the console renders."""

from __future__ import annotations

import pytest

from apps.backends.slurm.backend import SlurmBackend
from apps.fleet.models import Cluster
from tests.backends.contract import BackendContract
from tests.backends.slurm.conftest import connection

HEADROOM_S = 120  # the time limit sits well above the sleep, so no job is cut short


class TestSlurmContract(BackendContract):
    gpus_per_node = 8
    timeout_s = 60.0
    poll_s = 0.3
    settle_s = 3.0
    run_s = 3
    long_run_s = 600
    usage_tolerance_s = 2.0  # sacct counts whole seconds; sleep 3 takes 3 to 4

    @pytest.fixture
    def backend(self, local_slurm, db):
        return SlurmBackend(Cluster(name="gpuc", kind="slurm", connection=connection(local_slurm)))

    def workload_spec(self, name, **fields):
        # The console's sbatch script runs `srun torchrun ... -- sleep N` (torchrun is a stand-in on the jobs'
        # PATH, see connection()), as account root with QOS normal, which the local cluster has; --requeue
        # (retries) lets a drain requeue it.
        seconds = fields.pop("duration_s", None) or self.run_s
        fields.setdefault("gpu_model", "a100")
        fields.setdefault("max_runtime_s", seconds + HEADROOM_S)
        return super().workload_spec(
            name,
            command=["sleep", str(seconds)],
            retries=1,
            tier="normal",
            slurm_account="root",
            **fields,
        )
