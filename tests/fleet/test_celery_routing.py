"""Celery queues and routing: per-cluster work goes to its kind's queue, one task per cluster; the beat schedule
names the queue of every entry; the worker concurrency setting."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.utils.module_loading import import_string

from apps.fleet.services import create_simulated_cluster
from console.celery import app

PER_CLUSTER = {
    "apps.health.tasks.health_cycle_task": ("apps.health.tasks.ingest_cluster_task", "health"),
    "apps.fleet.tasks.sync_all_clusters_task": ("apps.fleet.tasks.sync_cluster_task", "inventory"),
    "apps.chargeback.tasks.meter_usage_task": ("apps.chargeback.tasks.meter_cluster_task", "metering"),
}


def queue_of(task_name: str) -> str:
    return app.amqp.router.route({}, task_name)["queue"].name


def test_every_queue_is_declared_and_each_kind_of_per_cluster_work_has_its_own():
    declared = set(app.amqp.queues)
    assert declared == set(settings.CELERY_QUEUE_NAMES) == {"celery", "health", "inventory", "metering"}
    for fan_out, (per_cluster, queue) in PER_CLUSTER.items():
        assert queue_of(per_cluster) == queue
        assert queue_of(fan_out) == "celery"  # the fan-out is small: it never waits behind the work it starts
    assert queue_of("apps.operations.tasks.run_operation_task") == "celery"


def test_the_beat_schedule_names_the_queue_of_every_entry():
    schedule = app.conf.beat_schedule
    for name, entry in schedule.items():
        queue = entry.get("options", {}).get("queue")
        assert queue in settings.CELERY_QUEUE_NAMES, name
        assert queue == queue_of(entry["task"]), name  # what beat sends goes where the routes would send it
    fan_outs = {entry["task"] for entry in schedule.values()} & set(PER_CLUSTER)
    assert fan_outs == set(PER_CLUSTER)  # the fleet-sized work is started by fan-outs, never run whole


@pytest.mark.django_db
@pytest.mark.parametrize("fan_out", sorted(PER_CLUSTER))
def test_a_fan_out_sends_one_task_per_cluster_to_its_queue(fan_out, published):
    clusters = [
        create_simulated_cluster(None, f"c{i}", {"nodes": 1, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": i})
        for i in range(3)
    ]
    published.clear()
    task = import_string(fan_out)
    task.run()  # what the beat entry's message runs in a worker
    per_cluster, queue = PER_CLUSTER[fan_out]
    assert sorted(published) == [(per_cluster, queue)] * len(clusters)


def test_worker_concurrency_setting(monkeypatch):
    import subprocess
    import sys

    assert settings.CELERY_WORKER_CONCURRENCY == 2 and app.conf.worker_concurrency == 2
    code = (
        "import django; django.setup(); from console.celery import app; from django.conf import settings; "
        "print(settings.CELERY_WORKER_CONCURRENCY, app.conf.worker_concurrency)"
    )
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "console.settings", "SECRET_KEY": "x" * 50}
    for value, expected in (("4", "4 4"), ("1", "1 1")):
        result = subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "CELERY_WORKER_CONCURRENCY": value},
            capture_output=True,
            text=True,
            check=True,
            cwd=settings.BASE_DIR,
        )
        assert result.stdout.split("\n")[-2] == expected
    bad = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "CELERY_WORKER_CONCURRENCY": "0"},
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
    )
    assert bad.returncode != 0 and "CELERY_WORKER_CONCURRENCY" in bad.stderr
