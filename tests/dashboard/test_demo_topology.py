"""The demo's simulated cluster declares Kueue's Topology Aware Scheduling (topology_scheduler kueue-tas): its
Kubernetes rendering of the seeded 4 x 8 leaf gang carries Kueue's pod-set annotation instead of a pod affinity,
strictly valid, while the simulator keeps placing the work itself."""

from __future__ import annotations

import yaml

from apps.dashboard.demo import DEMO_CLUSTER, seed_demo
from apps.fleet.models import Cluster
from apps.workloads.models import Workload
from apps.workloads.rendering import render_workload


def test_the_demo_cluster_renders_gangs_for_kueue_tas(db, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        seed_demo("admin", "demo-password-1234")
    cluster = Cluster.objects.get(name=DEMO_CLUSTER)
    assert cluster.connection["topology_scheduler"] == "kueue-tas"
    workload = Workload.objects.get(cluster=cluster, name="llm-pretrain-70b")
    text, error = render_workload(workload)
    assert error == ""
    job = next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "Job")
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "topology.simulator/leaf-switch"
    }
    assert "affinity" not in template["spec"]
