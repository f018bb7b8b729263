"""The Backend contract: behaviour every backend must show, written once and run against each backend.

A backend's test module subclasses `BackendContract` (the class name must start with `Test` there)
and provides:

- a `backend` fixture: a Backend over a fleet of at least 2 schedulable nodes, each with at least
  `gpus_per_node` GPUs of one model, with nothing else running on it;
- `workload_spec(name, **fields)`: what the console submits (a typed training spec and its render
  context, `console_spec`) that this backend can really run for about `fields["duration_s"]` seconds
  (a real backend adds its image, command and where it runs);
- `desired_state()`: a quota state this backend can push (by default queue contract/contract, bound to
  namespace "contract" and account "contract_contract", 8 + 4 H100s);
- `let_time_pass(backend, seconds)`: a real backend sleeps; the simulator advances its clock.

Timing knobs (class attributes) let a slow real backend pass: `timeout_s` bounds every wait,
`poll_s` is the pause between polls, `settle_s` is how long "must not happen" is watched, `run_s`
is how long short workloads run and `usage_tolerance_s` how far usage may differ from run time
(per GPU); `limit_s` is the max runtime a run that outlasts it gets, `limit_timeout_s` how long its stop may
take to show (Slurm counts time limits in minutes and checks them every 30 s). Everything a test submits
is cancelled and every node it touches is resumed at teardown.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import pytest

from apps.backends.base import Backend, NotFoundError
from apps.backends.render.desired import DesiredState, GpuModelRef, QueueSpec, QuotaLine, TenantSpec, TierSpec
from apps.backends.types import (
    BackendState,
    ConnectionReport,
    DrainResult,
    Inventory,
    PushResult,
    SubmitResult,
    Taint,
    UsageRecord,
    WorkloadSpec,
    WorkloadStatus,
)
from tests.backends.console_specs import console_spec

T = TypeVar("T")
HEALTH = {"healthy", "warning", "unhealthy", "unknown"}
LIVE = {BackendState.PENDING, BackendState.RUNNING}


class BackendContract:
    gpus_per_node: int = 4
    timeout_s: float = 300.0
    poll_s: float = 2.0
    settle_s: float = 10.0
    run_s: int = 30
    long_run_s: int = 3600
    limit_s: int = 60
    limit_timeout_s: float = 300.0
    usage_tolerance_s: float = 15.0

    # Hooks a backend's test class provides or overrides.

    @pytest.fixture
    def backend(self) -> Backend:
        raise NotImplementedError("the backend's test class provides the `backend` fixture")

    def workload_spec(self, name: str, **fields) -> WorkloadSpec:
        fields.setdefault("tenant", "contract")
        fields.setdefault("queue", "contract")
        return console_spec(name, **fields)

    def desired_state(self) -> DesiredState:
        return DesiredState(
            cluster="contract",
            tenants=(TenantSpec("contract", "contract", None, {"h100": 8}),),
            queues=(
                QueueSpec(
                    "contract",
                    "contract",
                    namespaces=("contract",),
                    slurm_account="contract_contract",
                    quotas=(QuotaLine("h100", 8, borrow_limit=4),),
                ),
            ),
            tiers=(TierSpec("training", 100, True, True),),
            gpu_models=(GpuModelRef("h100", "H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3", "h100"),),
        )

    def let_time_pass(self, backend: Backend, seconds: float) -> None:
        time.sleep(seconds)

    # Helpers

    @pytest.fixture(autouse=True)
    def _cleanup(self, backend):
        """Cancel what the test submitted and resume the nodes it touched, even when it failed."""
        self._submitted: list[str] = []
        self._touched: set[str] = set()
        yield
        # Teardown tries every item: one failure must not leave the rest behind.
        for backend_id in self._submitted:
            with contextlib.suppress(Exception):
                backend.cancel(backend_id)
        for node in sorted(self._touched):
            with contextlib.suppress(Exception):
                backend.untaint(node, "contract")
            with contextlib.suppress(Exception):
                backend.resume(node)

    def name(self, prefix: str) -> str:
        return f"contract-{prefix}-{uuid.uuid4().hex[:8]}"

    def submit(self, backend: Backend, spec: WorkloadSpec) -> SubmitResult:
        self._submitted.append(spec.name)
        return backend.submit(spec)

    def wait_until(self, backend: Backend, check: Callable[[], T], what: str, timeout: float | None = None) -> T:
        deadline = time.monotonic() + (self.timeout_s if timeout is None else timeout)
        waited = 0.0
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline or waited > (self.timeout_s if timeout is None else timeout):
                pytest.fail(f"timed out waiting for {what}")
            self.let_time_pass(backend, self.poll_s)
            waited += self.poll_s

    def wait_state(
        self, backend: Backend, backend_id: str, states: set[BackendState], timeout: float | None = None
    ) -> WorkloadStatus:
        def check():
            status = backend.status([backend_id])[backend_id]
            return status if status.state in states else None

        return self.wait_until(backend, check, f"{backend_id} to reach {sorted(states)}", timeout)

    def stays_pending(self, backend: Backend, backend_id: str) -> None:
        waited = 0.0
        while waited < self.settle_s:
            status = backend.status([backend_id])[backend_id]
            assert status.state == BackendState.PENDING, (status.state, status.reason)
            self.let_time_pass(backend, self.poll_s)
            waited += self.poll_s

    def fleet_nodes(self, backend: Backend) -> list[str]:
        """Names of the nodes of the fleet's main model with at least `gpus_per_node` GPUs."""
        nodes = [n for n in backend.inventory().nodes if len(n.gpus) >= self.gpus_per_node]
        models = [n.gpu_model for n in nodes]
        main = max(set(models), key=models.count)
        names = sorted(n.name for n in nodes if n.gpu_model == main)
        assert len(names) >= 2, "the contract needs a fleet of at least 2 nodes of one model"
        return names

    def node_info(self, backend: Backend, name: str):
        return next(n for n in backend.inventory().nodes if n.name == name)

    def cordon(self, backend: Backend, node: str, reason: str = "contract") -> None:
        self._touched.add(node)
        backend.cordon(node, reason)

    def whole_node(self, name: str, duration_s: int) -> WorkloadSpec:
        return self.workload_spec(name, gpus_per_worker=self.gpus_per_node, duration_s=duration_s)

    def backend_now(self, backend: Backend) -> datetime:
        """The backend's clock (the simulator's differs from the wall clock)."""
        return backend.inventory().taken_at

    # The contract

    def test_connection_is_ok(self, backend):
        report = backend.test_connection()
        assert isinstance(report, ConnectionReport)
        assert report.ok, report.message
        assert report.server_version

    def test_inventory_shape(self, backend):
        inventory = backend.inventory()
        assert isinstance(inventory, Inventory)
        assert isinstance(inventory.taken_at, datetime) and inventory.taken_at.tzinfo is not None
        assert len({n.name for n in inventory.nodes}) == len(inventory.nodes) >= 2
        uuids = set()
        for node in inventory.nodes:
            assert node.name and node.state in {"ready", "not-ready", "down"}
            assert [g.index for g in node.gpus] == list(range(len(node.gpus)))
            for gpu in node.gpus:
                assert gpu.uuid and gpu.model and gpu.memory_mib > 0
                assert gpu.health in HEALTH
                assert 0.0 <= gpu.allocated_fraction <= 1.0
                uuids.add(gpu.uuid)
        assert len(uuids) == sum(len(n.gpus) for n in inventory.nodes), "GPU UUIDs must be unique"
        self.fleet_nodes(backend)

    def test_submit_runs_to_success(self, backend):
        name = self.name("ok")
        result = self.submit(backend, self.workload_spec(name, duration_s=self.run_s))
        assert isinstance(result, SubmitResult)
        assert result.backend_id and result.state in LIVE
        running = self.wait_state(backend, result.backend_id, {BackendState.RUNNING, BackendState.SUCCEEDED})
        if running.state == BackendState.RUNNING:
            known = {n.name for n in backend.inventory().nodes}
            assert running.placements and {p.node for p in running.placements} <= known
        done = self.wait_state(backend, result.backend_id, {BackendState.SUCCEEDED, BackendState.FAILED})
        assert done.state == BackendState.SUCCEEDED, done.reason
        assert done.finished_at is not None

    def test_a_run_its_max_runtime_stops_is_timed_out(self, backend):
        """Work that outlasts the spec's max runtime is stopped at the limit and reported TIMED_OUT: neither
        SUCCEEDED nor an ordinary failure (Kubernetes: the Job's Failed condition with reason DeadlineExceeded;
        Slurm: TIMEOUT), and its GPUs are free again."""
        spec = self.workload_spec(self.name("limit"), duration_s=self.long_run_s, max_runtime_s=self.limit_s)
        result = self.submit(backend, spec)
        self.wait_state(backend, result.backend_id, {BackendState.RUNNING})
        ended = {s for s in BackendState if s.finished}
        done = self.wait_state(backend, result.backend_id, ended, timeout=self.limit_timeout_s)
        assert done.state == BackendState.TIMED_OUT, (done.state, done.reason)
        assert done.reason and done.finished_at is not None
        assert done.started_at is None or done.finished_at >= done.started_at
        self.wait_until(
            backend,
            lambda: not any(result.backend_id in g.allocated_to for n in backend.inventory().nodes for g in n.gpus),
            "the timed-out workload's GPUs to be free",
        )

    def test_submit_is_idempotent_by_name(self, backend):
        name = self.name("idem")
        spec = self.workload_spec(name, duration_s=self.long_run_s)
        first = self.submit(backend, spec)
        second = backend.submit(spec)
        assert second.backend_id == first.backend_id
        self.wait_state(backend, first.backend_id, {BackendState.RUNNING})
        held = [g for n in backend.inventory().nodes for g in n.gpus if first.backend_id in g.allocated_to]
        assert len(held) == 1, "submitting the same name twice must not run it twice"

    def test_status_of_unknown_id_is_unknown(self, backend):
        missing = self.name("missing")
        statuses = backend.status([missing])
        assert statuses[missing].state == BackendState.UNKNOWN

    def test_cancel_running(self, backend):
        result = self.submit(backend, self.workload_spec(self.name("cancel-run"), duration_s=self.long_run_s))
        self.wait_state(backend, result.backend_id, {BackendState.RUNNING})
        after = backend.cancel(result.backend_id)
        assert isinstance(after, WorkloadStatus)
        assert after.state in {BackendState.CANCELLED, BackendState.RUNNING}  # a real backend may still be stopping
        self.wait_state(backend, result.backend_id, {BackendState.CANCELLED})
        self.wait_until(
            backend,
            lambda: not any(result.backend_id in g.allocated_to for n in backend.inventory().nodes for g in n.gpus),
            "the cancelled workload's GPUs to be free",
        )

    def test_cancel_pending(self, backend):
        nodes = self.fleet_nodes(backend)
        for node in nodes:
            self.cordon(backend, node)
        result = self.submit(backend, self.workload_spec(self.name("cancel-pend"), duration_s=self.run_s))
        assert result.state == BackendState.PENDING
        backend.cancel(result.backend_id)
        self.wait_state(backend, result.backend_id, {BackendState.CANCELLED})

    def test_cancel_finished_is_not_an_error(self, backend):
        result = self.submit(backend, self.workload_spec(self.name("cancel-done"), duration_s=self.run_s))
        self.wait_state(backend, result.backend_id, {BackendState.SUCCEEDED})
        after = backend.cancel(result.backend_id)
        assert after.state == BackendState.SUCCEEDED

    def test_cancel_unknown_raises_not_found(self, backend):
        with pytest.raises(NotFoundError):
            backend.cancel(self.name("missing"))

    def test_cordon_stops_new_placement(self, backend):
        nodes = self.fleet_nodes(backend)
        keep, others = nodes[0], nodes[1:]
        for node in others:
            self.cordon(backend, node)
        assert all(self.node_info(backend, n).unschedulable for n in others)
        first = self.submit(backend, self.whole_node(self.name("cordon-a"), self.long_run_s))
        running = self.wait_state(backend, first.backend_id, {BackendState.RUNNING})
        assert {p.node for p in running.placements} == {keep}
        self.cordon(backend, keep)
        second = self.submit(backend, self.workload_spec(self.name("cordon-b"), duration_s=self.run_s))
        self.stays_pending(backend, second.backend_id)
        backend.uncordon(others[0])
        assert not self.node_info(backend, others[0]).unschedulable
        running = self.wait_state(backend, second.backend_id, {BackendState.RUNNING, BackendState.SUCCEEDED})
        if running.state == BackendState.RUNNING:
            assert {p.node for p in running.placements} == {others[0]}

    def test_drain_evicts_running_work(self, backend):
        result = self.submit(backend, self.whole_node(self.name("drain"), self.long_run_s))
        running = self.wait_state(backend, result.backend_id, {BackendState.RUNNING})
        node = running.placements[0].node
        self._touched.add(node)
        drained = backend.drain(node, "contract: drain test")
        assert isinstance(drained, DrainResult)
        assert drained.node == node
        assert result.backend_id in drained.evicted
        assert self.node_info(backend, node).unschedulable

        def evicted():
            status = backend.status([result.backend_id])[result.backend_id]
            on_node = any(p.node == node for p in status.placements)
            return status if not on_node and status.state in LIVE | {BackendState.PREEMPTED} else None

        self.wait_until(backend, evicted, f"{result.backend_id} to leave {node}")

    def test_resume_returns_the_node(self, backend):
        nodes = self.fleet_nodes(backend)
        target, others = nodes[0], nodes[1:]
        self._touched.add(target)
        backend.drain(target, "contract: resume test")
        assert self.node_info(backend, target).unschedulable
        backend.resume(target)
        assert not self.node_info(backend, target).unschedulable
        for node in others:
            self.cordon(backend, node)
        result = self.submit(backend, self.whole_node(self.name("resume"), self.long_run_s))
        running = self.wait_state(backend, result.backend_id, {BackendState.RUNNING})
        assert {p.node for p in running.placements} == {target}

    def test_taint_untaint_round_trip(self, backend):
        node = self.fleet_nodes(backend)[0]
        self._touched.add(node)
        taint = Taint("contract", "yes", "NoSchedule")
        backend.taint(node, taint)
        assert taint in self.node_info(backend, node).taints
        backend.untaint(node, "contract")
        assert all(t.key != "contract" for t in self.node_info(backend, node).taints)

    @pytest.mark.parametrize(
        "operation",
        [
            lambda b, n: b.cordon(n, "x"),
            lambda b, n: b.uncordon(n),
            lambda b, n: b.drain(n, "x"),
            lambda b, n: b.resume(n),
            lambda b, n: b.taint(n, Taint("contract", "x")),
            lambda b, n: b.untaint(n, "contract"),
        ],
        ids=["cordon", "uncordon", "drain", "resume", "taint", "untaint"],
    )
    def test_unknown_node_raises_not_found(self, backend, operation):
        with pytest.raises(NotFoundError) as caught:
            operation(backend, "no-such-node-x")
        assert "no-such-node-x" in str(caught.value)

    def test_push_quota_returns_a_push_result(self, backend):
        result = backend.push_quota(self.desired_state())
        assert isinstance(result, PushResult)
        assert result.applied + result.unchanged >= 1

    def test_usage_since_matches_what_ran(self, backend):
        since = self.backend_now(backend)
        gpus = 2
        result = self.submit(
            backend, self.workload_spec(self.name("usage"), gpus_per_worker=gpus, duration_s=self.run_s)
        )
        self.wait_state(backend, result.backend_id, {BackendState.SUCCEEDED})
        records = [r for r in backend.usage_since(since) if r.backend_id == result.backend_id]
        assert records and all(isinstance(r, UsageRecord) for r in records)
        assert all(r.gpu_model and r.start >= since and r.end > r.start for r in records)
        used = sum(r.gpu_seconds for r in records)
        assert abs(used - gpus * self.run_s) <= gpus * self.usage_tolerance_s, used
