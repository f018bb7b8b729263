"""The Backend contract against the Kubernetes backend, through the official client and a fake API server.

The fake's control plane (tests/backends/k8s_fake/cluster.py) admits, schedules and runs pods in fake time:
a pod runs for the `sleep N` of its command, so `let_time_pass` advances the fake's clock.
"""

from __future__ import annotations

import pytest

from apps.backends.kubernetes.backend import KubernetesBackend
from tests.backends.contract import BackendContract
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.conftest import bind_queue, make_cluster, seed_nodes


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

    def workload_spec(self, name, **fields):
        # The job sleeps for the contract's duration; its max runtime is longer. It runs in namespace "contract".
        seconds = fields.pop("duration_s", self.run_s)
        fields.setdefault("gpu_model", "h100")
        fields.setdefault("image", "busybox:1.36")
        fields.setdefault("command", ["sleep", str(seconds)])
        fields.setdefault("max_runtime_s", seconds * 2 + 60)
        return super().workload_spec(name, namespace="contract", **fields)

    def let_time_pass(self, backend, seconds):
        backend.fake.advance(seconds)
