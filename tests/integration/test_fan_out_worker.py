"""The fan-out stamp through a real Celery worker on Redis: the worker's run of the cycle clears it, so beat's next
tick sends the cluster's next cycle (tests/fleet/test_fan_out.py holds the rest without a worker)."""

from __future__ import annotations

import pytest

from apps.fleet.models import FanOutStamp
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.health.models import NodeHealth
from apps.health.tasks import health_cycle_task, ingest_cluster_task
from tests.utils.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_worker_clears_the_stamp_and_the_next_tick_sends_again(live_celery):
    cluster = create_simulated_cluster(None, "fo", {"nodes": 1, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 4})
    assert sync_inventory(cluster.pk).ok
    stamp = FanOutStamp.objects.filter(cluster=cluster, kind=ingest_cluster_task.name)
    for tick in range(2):
        assert health_cycle_task.run() == 1  # beat's tick, as the worker runs it
        assert wait_until(lambda: stamp.filter(finished_at__isnull=False).exists())
        finished = stamp.get()
        assert finished.queued_at <= finished.started_at <= finished.finished_at
        assert NodeHealth.objects.filter(node__cluster=cluster, exporter_up=True).count() == 1
