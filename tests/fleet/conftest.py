"""Fixtures of the fleet tests: the messages a fan-out publishes, and a small synced simulated cluster."""

from __future__ import annotations

import pytest
from celery.signals import before_task_publish
from django.conf import settings

from apps.fleet.services import create_simulated_cluster, sync_inventory
from console.celery import app
from tests.conftest import set_celery_eager


@pytest.fixture
def published():
    """Every message the code under test publishes (the task and the queue it is routed to), with eager mode off."""
    sent: list[tuple[str, str]] = []

    def record(sender=None, headers=None, routing_key=None, **kwargs):
        sent.append((headers["task"], routing_key))

    before_task_publish.connect(record, weak=False)
    set_celery_eager(False)
    try:
        yield sent
    finally:
        set_celery_eager(True)
        before_task_publish.disconnect(record)
        with app.connection_for_write() as conn:  # what was published here is never run
            for queue in settings.CELERY_QUEUE_NAMES:
                conn.default_channel.queue_purge(queue)


@pytest.fixture
def sim(personas):
    """`sim`: 4 nodes of 8 GPUs, H100 and L40S, synced."""
    cluster = create_simulated_cluster(
        None, "sim", {"nodes": 4, "gpus_per_node": 8, "models": {"h100": 0.5, "l40s": 0.5}, "seed": 5}
    )
    assert sync_inventory(cluster.pk).ok
    return cluster
