"""The console's Celery app with the fleet-scale benchmark's timing signals (bench/fleet_scale_bench.py).

Workers and beat of that benchmark are started with `-A bench.fleet_scale_app`: every published message carries the
time it was sent (a header), and every task run appends one JSON line to $BENCH_TASK_LOG: task, queue, worker, the
cluster it was for, sent / started / finished (wall clock) and the CPU seconds of the process that ran it. Nothing
else changes: the schedule, routes and queues are console/celery.py's and the settings'.
"""

from __future__ import annotations

import json
import os
import time

from celery.signals import before_task_publish, task_postrun, task_prerun

from console.celery import app  # noqa: F401 - the app the worker and beat run

LOG = os.environ.get("BENCH_TASK_LOG", "var/bench/fleet-scale-tasks.jsonl")
_started: dict[str, tuple[float, float]] = {}


@before_task_publish.connect(weak=False)
def _stamp(headers=None, **kwargs):
    if headers is not None:
        headers["bench_sent_at"] = time.time()


@task_prerun.connect(weak=False)
def _start(task_id=None, **kwargs):
    _started[task_id] = (time.time(), time.process_time())


@task_postrun.connect(weak=False)
def _finish(task_id=None, task=None, args=None, **kwargs):
    started, cpu = _started.pop(task_id, (None, None))
    if started is None:
        return
    request = task.request
    sent = getattr(request, "bench_sent_at", None) or (getattr(request, "headers", None) or {}).get("bench_sent_at")
    record = {
        "task": task.name.rsplit(".", 1)[-1],
        "queue": (request.delivery_info or {}).get("routing_key"),
        "worker": request.hostname,
        "pid": os.getpid(),
        "cluster": args[0] if args else None,
        "sent": sent,
        "started": started,
        "finished": time.time(),
        "cpu": time.process_time() - cpu,
    }
    with open(LOG, "a") as log:  # one short line per write: appends from several processes do not interleave
        log.write(json.dumps(record) + "\n")
