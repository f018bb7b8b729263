"""XID 79 to a cordoned node through a real Celery worker on Redis: the cycle task, then the operation task."""

from __future__ import annotations

import pytest

from apps.backends.simulator.services import inject_fault
from apps.fleet.models import Node
from apps.fleet.services import create_simulated_cluster, sync_inventory
from apps.health.models import Incident, NodeHealth
from apps.health.tasks import ingest_cluster_task
from tests.utils.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_xid79_is_cordoned_by_the_worker(live_celery):
    cluster = create_simulated_cluster(None, "hw", {"nodes": 2, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 2})
    assert sync_inventory(cluster.pk).ok
    ingest_cluster_task.delay(cluster.pk)
    assert wait_until(lambda: NodeHealth.objects.filter(node__cluster=cluster, exporter_up=True).count() == 2)
    inject_fault(None, cluster, "gpu-0002", "xid79", 6, reason="integration")
    ingest_cluster_task.delay(cluster.pk)
    assert wait_until(lambda: Node.objects.get(cluster=cluster, name="gpu-0002").unschedulable)
    assert wait_until(lambda: Incident.objects.get(cause="xid-79").state == "isolated")
    assert not Node.objects.get(cluster=cluster, name="gpu-0001").unschedulable
