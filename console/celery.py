"""The console's Celery application; periodic work is declared here or in django-celery-beat."""

from __future__ import annotations

import os

from celery import Celery
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
# The default app in every thread: code below console/ (probes, metrics, wake-ups) reaches it through
# celery.current_app instead of importing this module.
app.set_default()
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Periodic work, declared once. Apps add entries here as they gain periodic tasks. Work that grows with the fleet
# is never one task for the whole fleet: its entry starts a small fan-out task (on the default queue, named in
# "options") that sends one task per cluster to that kind's queue (settings.CELERY_TASK_ROUTES), so the
# clusters spread over the workers. tests/fleet/test_celery_routing.py holds both to this.
app.conf.beat_schedule = {
    # Admission pass, dispatch of admitted work, reclaim, outbox retries and status reconcile.
    "workloads-tick": {
        "task": "apps.workloads.tasks.workloads_tick_task",
        "schedule": 10.0,
    },
    "sync-inventory": {
        "task": "apps.fleet.tasks.sync_all_clusters_task",
        "schedule": 60.0,
        "options": {"queue": "celery"},  # the fan-out: sync_cluster_task per cluster, queue "inventory"
    },
    # Usage metering from every backend (idempotent per cluster watermark), fault credits, budget alerts.
    "chargeback-meter": {
        "task": "apps.chargeback.tasks.meter_usage_task",
        "schedule": 60.0,
        "options": {"queue": "celery"},  # the fan-out: meter_cluster_task per cluster, queue "metering"
    },
    # What changed by hand on Kubernetes clusters against the console's quota state (an operation each).
    "kubernetes-quota-drift": {
        "task": "apps.fleet.tasks.quota_drift_all_task",
        "schedule": 3600.0,
    },
    # Every running inference service's engine /metrics: TTFT/TPOT series, SLO burn rates, alerts.
    "inference-scrape": {
        "task": "apps.inference.tasks.scrape_services_task",
        "schedule": float(settings.INFERENCE_SCRAPE_INTERVAL_S),
    },
    "inference-prune": {
        "task": "apps.inference.tasks.prune_telemetry_task",
        "schedule": 3600.0,
    },
    # DCGM ingestion and health evaluation, one task per cluster.
    "health-cycle": {
        "task": "apps.health.tasks.health_cycle_task",
        "schedule": float(settings.HEALTH_SCRAPE_INTERVAL_S),
        "options": {"queue": "celery"},  # the fan-out: ingest_cluster_task per cluster, queue "health"
    },
    # Hung training jobs, judged from the minute rollups once a minute: check_hung_jobs_task per cluster ("health").
    "hung-jobs": {
        "task": "apps.health.tasks.hung_jobs_task",
        "schedule": 60.0,
        "options": {"queue": "celery"},
    },
    # Close quiet incidents, resume what automation isolated once validated, resend lost notifications.
    "health-housekeeping": {
        "task": "apps.health.tasks.health_housekeeping_task",
        "schedule": 30.0,
    },
    "prune-health-rollups": {
        "task": "apps.health.tasks.prune_rollups_task",
        "schedule": 3600.0,
    },
    "prune-finished-operations": {
        "task": "apps.operations.tasks.prune_operations_task",
        "schedule": 24 * 3600.0,
    },
}
# Everything else periodic is small and runs on the default queue, named so that the schedule says where each
# entry goes (django-celery-beat stores it as the periodic task's queue).
for _entry in app.conf.beat_schedule.values():
    _entry.setdefault("options", {"queue": settings.CELERY_TASK_DEFAULT_QUEUE})
