"""The Backend contract against the Kubernetes backend, through the official client and a fake API server.

The fake's control plane (tests/backends/k8s_fake/cluster.py) admits, schedules and runs pods in fake time:
a pod runs for the `sleep N` of its command, so `let_time_pass` advances the fake's clock.
"""

from __future__ import annotations

import functools

import pytest

from apps.backends.kubernetes.backend import KubernetesBackend
from tests.backends.contract import BackendContract
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.conftest import KUEUE_NEVER_ADMITS, bind_queue, make_cluster, seed_nodes


def _never_admitted(test):
    """The contract's test, expected to fail here until the console's Kueue objects admit its workloads
    (a wrapper: the mark must not reach the other backends' contract classes)."""

    @functools.wraps(test)
    def wrapper(self, *args, **kwargs):
        return test(self, *args, **kwargs)

    return KUEUE_NEVER_ADMITS(wrapper)


class TestKubernetesContract(BackendContract):
    gpus_per_node = 4
    timeout_s = 600.0  # fake seconds
    poll_s = 5.0
    settle_s = 30.0
    run_s = 30
    usage_tolerance_s = 1.0  # the fake runs a pod for exactly its sleep, to the second

    @pytest.fixture
    def backend(self, db):
        fake = FakeKubernetes().start()
        seed_nodes(fake, count=2, gpus=4)
        cluster = make_cluster(fake)
        bind_queue(cluster, "contract", "contract", ["contract"])
        backend = KubernetesBackend(cluster, sleep=lambda seconds: None)
        # As a platform admin leaves a cluster: the contract's quota (namespace, priority classes, Kueue queues).
        backend.push_quota(self.desired_state())
        backend.fake = fake
        yield backend
        fake.stop()

    test_submit_runs_to_success = _never_admitted(BackendContract.test_submit_runs_to_success)
    test_submit_is_idempotent_by_name = _never_admitted(BackendContract.test_submit_is_idempotent_by_name)
    test_cancel_running = _never_admitted(BackendContract.test_cancel_running)
    test_cancel_finished_is_not_an_error = _never_admitted(BackendContract.test_cancel_finished_is_not_an_error)
    test_cordon_stops_new_placement = _never_admitted(BackendContract.test_cordon_stops_new_placement)
    test_drain_evicts_running_work = _never_admitted(BackendContract.test_drain_evicts_running_work)
    test_resume_returns_the_node = _never_admitted(BackendContract.test_resume_returns_the_node)
    test_usage_since_matches_what_ran = _never_admitted(BackendContract.test_usage_since_matches_what_ran)

    def workload_spec(self, name, **fields):
        # The job sleeps for the contract's duration; its max runtime is longer. It runs in namespace "contract".
        seconds = fields.pop("duration_s", self.run_s)
        fields.setdefault("gpu_model", "h100")
        fields.setdefault("image", "busybox:1.36")
        fields.setdefault("command", ["sleep", str(seconds)])
        return super().workload_spec(name, max_runtime_s=seconds * 2 + 60, namespace="contract", **fields)

    def let_time_pass(self, backend, seconds):
        backend.fake.advance(seconds)
