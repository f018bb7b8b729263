"""Chargeback meters a Kubernetes cluster through the same `usage_since` path as the simulator."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from itertools import pairwise

from django.db.models import Sum
from django.utils import timezone

from apps.chargeback.metering import meter_cluster
from apps.chargeback.models import MeterWatermark, UsageRecord
from apps.workloads import services
from tests.backends.kubernetes.test_console import k8s, submit  # noqa: F401 - the fixture is used by name


def test_a_two_pod_job_is_metered_once_as_one_workload(k8s, fake, personas, api, django_capture_on_commit_callbacks):  # noqa: F811
    # Kubernetes times are whole seconds: the pods start five minutes ago in the API server's clock, and
    # metering starts before that.
    MeterWatermark.objects.create(cluster=k8s, metered_until=timezone.now() - timedelta(minutes=10))
    fake.advance(-300)
    workload = submit(api, personas, django_capture_on_commit_callbacks, workers=2, gpus_per_worker=8)
    services.reconcile_workloads()
    fake.advance(300)
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
    first = meter_cluster(k8s.pk)
    second = meter_cluster(k8s.pk)
    assert first.ok and second.ok and first.inserted >= 1, (first, second)
    rows = list(UsageRecord.objects.filter(cluster=k8s))
    assert rows and all(r.workload == workload and r.tenant == personas.a for r in rows)
    assert {r.gpus for r in rows} == {Decimal(16)}  # both pods of the gang in one record per span
    assert all(r.gpu_model.code == "h100" and r.tier.name == "training" for r in rows)
    spans = sorted((r.start, r.end) for r in rows)
    assert all(a[1] == b[0] for a, b in pairwise(spans))  # contiguous: nothing counted twice
    assert sum(r.seconds for r in rows) >= 300
    total = UsageRecord.objects.filter(cluster=k8s).aggregate(s=Sum("gpu_seconds"))["s"]
    assert total == sum((r.seconds * 16 for r in rows), Decimal(0))
