"""Celery task timing: run time and queue wait per task, from Celery's own signals."""

from __future__ import annotations

import time

from apps.core.metrics import TASK_LATENCY_SECONDS, TASK_SECONDS

_started: dict[str, float] = {}


def _prerun(task_id=None, task=None, **_):
    _started[task_id] = time.perf_counter()
    request = getattr(task, "request", None)
    # Celery hands custom message headers over as request attributes (protocol 2) or in `headers`.
    published = getattr(request, "gpuc_sent_at", None)
    if published is None and isinstance(getattr(request, "headers", None), dict):
        published = request.headers.get("gpuc_sent_at")
    if isinstance(published, int | float):
        TASK_LATENCY_SECONDS.labels(task.name).observe(max(time.time() - published, 0.0))


def _postrun(task_id=None, task=None, state=None, **_):
    start = _started.pop(task_id, None)
    if start is not None and task is not None:
        TASK_SECONDS.labels(task.name, (state or "unknown").lower()).observe(time.perf_counter() - start)


def _stamp(headers=None, **_):
    """Record when a task was published, so its worker can tell how long it waited in the queue."""
    if isinstance(headers, dict):
        headers["gpuc_sent_at"] = time.time()


def connect_celery_signals() -> None:
    from celery.signals import before_task_publish, task_postrun, task_prerun

    before_task_publish.connect(_stamp, weak=False, dispatch_uid="gpuc-stamp")
    task_prerun.connect(_prerun, weak=False, dispatch_uid="gpuc-prerun")
    task_postrun.connect(_postrun, weak=False, dispatch_uid="gpuc-postrun")
