"""Fixtures of the fleet tests: the messages a fan-out publishes."""

from __future__ import annotations

import pytest
from celery.signals import before_task_publish
from django.conf import settings

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
