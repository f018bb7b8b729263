"""Cold starts on the service page (docs/inference.md: warm starts): reconcile records each replica from its
backend's status (the simulator's here), completes it when the replica serves, and the page shows the median, the
last and the slowest, and what is still starting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.urls import reverse

from apps.backends.registry import get_backend
from apps.backends.render.spec import DEFAULT_IMAGES
from apps.backends.simulator import coldstart
from apps.backends.types import ReplicaStart
from apps.workloads import services as workloads
from apps.workloads.cold_starts import cold_starts, record_replica_starts
from apps.workloads.models import ReplicaStart as StoredStart
from tests.inference.conftest import run_service
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_replica_is_recorded_starting_then_served_and_the_page_shows_it(
    serving, personas, django_capture_on_commit_callbacks, client
):
    workload = run_service(personas, django_capture_on_commit_callbacks, model="meta-llama/Llama-3.1-70B-Instruct")
    (start,) = StoredStart.objects.filter(workload=workload)
    assert start.ready_at is None and start.seconds is None  # pulling, downloading
    client.force_login(fresh(personas.member_a))
    page = client.get(reverse("workloads:workload_detail", args=[workload.pk])).content.decode()
    assert 'data-testid="cold-start-starting"' in page and "starting since" in page
    get_backend(serving["cluster"]).advance(900)
    workloads.reconcile_workloads()
    start.refresh_from_db()
    expected = (
        coldstart.pull_s(DEFAULT_IMAGES["vllm"])
        + coldstart.download_s("Llama-3.1-70B")
        + coldstart.load_s("Llama-3.1-70B")
        + coldstart.ENGINE_START_S
    )
    assert start.seconds == expected and start.node
    page = client.get(reverse("workloads:workload_detail", args=[workload.pk])).content.decode()
    summary = page.split('data-testid="cold-start-summary">', 1)[1].split("</span>", 1)[0]
    assert f"median {expected} s (1 replica) · last {expected} s · slowest {expected} s" in " ".join(summary.split())
    assert "cold-start-starting" not in page


def test_only_inference_services_are_recorded_each_replica_once():
    service = SimpleNamespace(pk=None, kind="inference", backend_name="svc")
    training = SimpleNamespace(pk=None, kind="training", backend_name="job")
    status = SimpleNamespace(replica_starts=[ReplicaStart("pod-1", "n1", T0, T0 + timedelta(seconds=90))])
    assert record_replica_starts([training], {"job": status}) == 0
    assert record_replica_starts([service], {}) == 0


def test_the_summary_is_of_the_served_replicas_and_lists_the_starting_ones(
    serving, personas, django_capture_on_commit_callbacks
):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    StoredStart.objects.filter(workload=workload).delete()
    for i, seconds in enumerate([100, 40, 70, None]):
        StoredStart.objects.create(
            workload=workload,
            replica=f"pod-{i}",
            node="n1",
            scheduled_at=T0 + timedelta(minutes=i),
            ready_at=T0 + timedelta(minutes=i, seconds=seconds) if seconds is not None else None,
            seconds=seconds,
        )
    found = cold_starts(workload)
    assert (found.count, found.median_s, found.last_s, found.slowest_s) == (3, 70, 70, 100)
    assert [s.replica for s in found.starting] == ["pod-3"]
    assert [s.replica for s in found.latest] == ["pod-3", "pod-2", "pod-1", "pod-0"]
