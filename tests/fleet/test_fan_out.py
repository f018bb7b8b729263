"""The fan-out sends a cluster's task only once its last one of that kind finished (FanOutStamp, issue 23 part 1):
queued or running holds the cluster back, finishing (or failing) releases it, and a stamp that stopped moving expires
so that a lost task never holds its cluster back for good."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from apps.chargeback.tasks import meter_cluster_task, meter_usage_task
from apps.fleet import stamps
from apps.fleet.models import FanOutStamp
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.fleet.tasks import fan_out, sync_all_clusters_task, sync_cluster_task
from apps.health.tasks import health_cycle_task, ingest_cluster_task

pytestmark = pytest.mark.django_db

INGEST = ingest_cluster_task.name


@pytest.fixture
def clusters():
    out = [
        create_simulated_cluster(None, f"c{i}", {"nodes": 1, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": i})
        for i in range(2)
    ]
    for cluster in out:
        assert sync_inventory(cluster.pk).ok
    return out


def sent_for(published, task) -> int:
    return sum(1 for name, _ in published if name == task.name)


def test_a_second_fan_out_sends_nothing_while_the_first_tasks_are_queued(clusters, published):
    assert health_cycle_task.run() == 2 and sent_for(published, ingest_cluster_task) == 2
    assert health_cycle_task.run() == 0 and sent_for(published, ingest_cluster_task) == 2
    assert {s.cluster_id: (s.started_at, s.finished_at) for s in FanOutStamp.objects.filter(kind=INGEST)} == {
        c.pk: (None, None) for c in clusters
    }
    assert sync_all_clusters_task.run() == 2  # each kind has its own stamp


def test_a_finished_task_releases_its_cluster_and_a_running_one_holds_it(clusters, published):
    first, second = clusters
    health_cycle_task.run()
    ingest_cluster_task.run(first.pk)  # what the worker runs for the first message
    stamp = FanOutStamp.objects.get(kind=INGEST, cluster=first)
    assert stamp.started_at and stamp.finished_at >= stamp.started_at
    assert health_cycle_task.run() == 1 and published[-1] == (INGEST, "health")
    with stamps.running(INGEST, second.pk):  # the second cluster's task is running: still held back
        assert health_cycle_task.run() == 0
    assert health_cycle_task.run() == 1  # it finished


def test_a_task_that_fails_releases_its_cluster(clusters, published):
    first, _ = clusters
    health_cycle_task.run()
    with pytest.raises(RuntimeError), stamps.running(INGEST, first.pk):
        raise RuntimeError("the cycle broke")
    assert health_cycle_task.run() == 1


@override_settings(FAN_OUT_STAMP_EXPIRY_S=120)
def test_a_stamp_that_stopped_moving_expires(clusters, published):
    first, second = clusters
    health_cycle_task.run()
    now = timezone.now()
    FanOutStamp.objects.filter(cluster=first).update(queued_at=now - timedelta(seconds=121))  # its message lost
    FanOutStamp.objects.filter(cluster=second).update(queued_at=now - timedelta(seconds=119))
    assert health_cycle_task.run() == 1 and published[-1] == (INGEST, "health")
    assert FanOutStamp.objects.get(cluster=first).queued_at > now - timedelta(seconds=5)
    # started long after it was queued: counted from its start, so a long queue wait is not taken for a loss
    FanOutStamp.objects.filter(cluster=second).update(
        queued_at=now - timedelta(seconds=300), started_at=now - timedelta(seconds=60)
    )
    assert health_cycle_task.run() == 0
    FanOutStamp.objects.filter(cluster=second).update(started_at=now - timedelta(seconds=121))  # its worker killed
    assert health_cycle_task.run() == 1


def test_the_run_of_an_expired_stamp_leaves_the_new_one_alone(clusters, published):
    first, _ = clusters
    health_cycle_task.run()
    with stamps.running(INGEST, first.pk):
        FanOutStamp.objects.filter(cluster=first).update(started_at=timezone.now() - timedelta(hours=1))
        assert health_cycle_task.run() == 1  # expired: queued again
    assert FanOutStamp.objects.get(cluster=first).finished_at is None  # the old run's end left it queued
    assert health_cycle_task.run() == 0


@override_settings(HEALTH_SCRAPE_INTERVAL_S=0)
def test_a_cycle_that_outlasts_its_interval_queues_the_next_under_the_same_stamp(clusters, published):
    first, _ = clusters
    health_cycle_task.run()
    ingest_cluster_task.run(first.pk)  # took longer than the interval: sends its successor at once
    assert sent_for(published, ingest_cluster_task) == 3
    stamp = FanOutStamp.objects.get(kind=INGEST, cluster=first)
    assert (stamp.started_at, stamp.finished_at) == (None, None)  # the successor's: queued
    assert health_cycle_task.run() == 0  # beat's tick adds nothing behind it


def test_the_broker_refusing_a_message_leaves_no_stamp_behind(clusters, published, monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr(ingest_cluster_task, "delay", refuse)
    with pytest.raises(ConnectionError):
        health_cycle_task.run()
    monkeypatch.undo()
    assert health_cycle_task.run() == 2


def test_metering_and_sync_tasks_keep_their_stamps(clusters, published):
    first, _ = clusters
    assert meter_usage_task.run()["clusters"] == 2 and meter_usage_task.run()["clusters"] == 0
    meter_cluster_task.run(first.pk)
    assert meter_usage_task.run()["clusters"] == 1
    assert fan_out(sync_cluster_task) == 2
    sync_cluster_task.run(first.pk)
    assert fan_out(sync_cluster_task) == 1
