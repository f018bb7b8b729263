"""The Backend contract, run against the simulator (simulated time makes every wait instant)."""

from __future__ import annotations

import pytest

from apps.backends.simulator.specs import OUTCOME_LABEL
from tests.backends.contract import BackendContract
from tests.backends.helpers import make_cluster


class TestSimulatorContract(BackendContract):
    gpus_per_node = 4
    poll_s = 30.0  # simulated seconds per poll
    settle_s = 600.0
    run_s = 120
    usage_tolerance_s = 0.0  # simulated time is exact

    @pytest.fixture
    def backend(self, db):
        _cluster, backend = make_cluster("contract", nodes=2, gpus=4, models={"h100": 1.0}, seed=3)
        return backend

    def workload_spec(self, name, **fields):
        # The simulator runs a workload's work for its declared duration (the real backends' `sleep N`); its max
        # runtime is longer, as there, unless the test sets one.
        seconds = fields.pop("duration_s", self.run_s)
        fields.setdefault("max_runtime_s", seconds * 2 + 60)
        # The seed makes some workloads fail; the contract needs ones that succeed.
        fields["labels"] = {OUTCOME_LABEL: "succeed", **fields.get("labels", {})}
        spec = super().workload_spec(name, **fields)
        spec.duration_s = seconds
        return spec

    def let_time_pass(self, backend, seconds):
        backend.advance(seconds)
