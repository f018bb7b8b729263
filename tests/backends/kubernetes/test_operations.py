"""The quota push (with its dry-run preview) and the drift report as operations on a Kubernetes cluster."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.fleet.models import GpuModel
from apps.fleet.tasks import quota_drift_all_task
from apps.operations.models import Operation
from apps.tenancy.models import Quota
from tests.backends.kubernetes.conftest import bind_queue, make_cluster, seed_nodes
from tests.utils.personas import PASSWORD


@pytest.fixture
def k8s(personas, fake):
    seed_nodes(fake, count=1)
    cluster = make_cluster(fake)
    queue = bind_queue(cluster, "team-a", "train", ["team-a-train"])
    Quota.objects.create(queue=queue, gpu_model=GpuModel.objects.get(code="h100"), guaranteed=8)
    return cluster


def login(client, user):
    assert client.login(username=user.username, password=PASSWORD)
    return client


def post(client, user, route, capture, **data):
    with capture(execute=True):
        response = login(client, user).post(reverse(route, args=["k8s"]), data)
    assert response.status_code == 302, response
    return Operation.objects.order_by("-pk").first()


def test_dry_run_preview_then_push(k8s, fake, personas, client, django_capture_on_commit_callbacks):
    admin = personas.platform_admin
    preview = post(client, admin, "fleet:cluster_quota_push", django_capture_on_commit_callbacks, dry_run="1")
    assert preview.status == "succeeded", preview.error
    assert "would create ClusterQueue team-a-train" in preview.log
    assert fake.objects("kueue.x-k8s.io", "v1beta2", "clusterqueues") == []
    push = post(client, admin, "fleet:cluster_quota_push", django_capture_on_commit_callbacks)
    assert push.status == "succeeded", push.error
    assert push.result["applied"] > 0 and "create ClusterQueue team-a-train" in push.log
    assert fake.get("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a-train") is not None
    assert AuditEvent.objects.filter(action="operation.start", target_id=str(push.pk)).count() == 1


def test_only_platform_admins_push(k8s, fake, personas, client, django_capture_on_commit_callbacks):
    before = Operation.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        login(client, personas.oncall).post(reverse("fleet:cluster_quota_push", args=["k8s"]))
    assert Operation.objects.count() == before
    assert fake.requests_to("PATCH") == []


def test_periodic_drift_report_runs_as_the_system(k8s, fake, personas, client, django_capture_on_commit_callbacks):
    post(client, personas.platform_admin, "fleet:cluster_quota_push", django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        assert quota_drift_all_task() == 1
    clean = Operation.objects.filter(kind="tenancy.quota-drift").latest("pk")
    assert clean.status == "succeeded" and clean.actor is None and clean.result["clean"]
    assert AuditEvent.objects.get(action="operation.start", target_id=str(clean.pk)).actor is None
    with fake.lock:  # someone raises the ClusterQueue's quota with kubectl edit
        queue = fake.store.bucket(fake.resource("kueue.x-k8s.io", "v1beta2", "clusterqueues"))[("", "team-a-train")]
        queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 100
    drift = post(client, personas.oncall, "fleet:cluster_quota_drift", django_capture_on_commit_callbacks)
    assert drift.status == "succeeded" and not drift.result["clean"]
    assert "changed on the cluster: ClusterQueue team-a-train: spec.resourceGroups" in drift.log


def test_drift_operation_reports_what_the_cluster_would_not_act_on(
    k8s, fake, personas, client, django_capture_on_commit_callbacks
):
    post(client, personas.platform_admin, "fleet:cluster_quota_push", django_capture_on_commit_callbacks)
    queue = bind_queue(k8s, "team-b", "infer", ["team-b-infer"])
    Quota.objects.create(queue=queue, gpu_model=GpuModel.objects.get(code="l40s"), guaranteed=2)
    post(client, personas.platform_admin, "fleet:cluster_quota_push", django_capture_on_commit_callbacks)
    drift = post(client, personas.oncall, "fleet:cluster_quota_drift", django_capture_on_commit_callbacks)
    assert drift.status == "succeeded" and not drift.result["clean"]
    [line] = drift.result["inert"]
    assert line.startswith("ResourceFlavor l40s: no node has the labels nvidia.com/gpu.product=")
    assert f"not acted on by the cluster: {line}" in drift.log
