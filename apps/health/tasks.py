"""Celery tasks for GPU health: they take ids and call the ingestion cycle or a service."""

from celery import shared_task
from django.conf import settings

from apps.fleet import stamps
from apps.fleet.tasks import fan_out
from apps.health.ingest import run_cycle
from apps.health.services.housekeeping import close_quiet_incidents, prune_rollups
from apps.notifications.services import resend_due


@shared_task
def health_cycle_task() -> int:
    """Beat: one ingestion cycle per cluster that syncs (each on whichever worker takes it)."""
    return fan_out(ingest_cluster_task)


@shared_task(acks_late=True)
def ingest_cluster_task(cluster_id: int) -> dict:
    with stamps.running(ingest_cluster_task.name, cluster_id):
        result = run_cycle(cluster_id)
        if not result.skipped and result.duration_ms >= settings.HEALTH_SCRAPE_INTERVAL_S * 1000:
            # Beat's tick fell inside this cycle and sent nothing (the cluster's fan-out stamp): without this the
            # cluster would wait for the next tick. Start the next cycle now instead, stamped as the fan-out would.
            stamps.requeue(ingest_cluster_task.name, cluster_id)
            ingest_cluster_task.delay(cluster_id)
    return {
        "cluster": result.cluster,
        "nodes": result.nodes,
        "unreachable": result.unreachable,
        "findings": result.findings,
        "skipped": result.skipped,
        "duration_ms": result.duration_ms,
    }


@shared_task
def hung_jobs_task() -> int:
    """Beat, once a minute: the hung-job check of each cluster that syncs, one task per cluster (queue health)."""
    return fan_out(check_hung_jobs_task)


@shared_task(acks_late=True)
def check_hung_jobs_task(cluster_id: int) -> dict:
    from apps.health.hung import check_cluster

    with stamps.running(check_hung_jobs_task.name, cluster_id):
        result = check_cluster(cluster_id)
    return {"cluster": result.cluster, "judged": result.judged, "hung": result.hung, "opened": result.opened}


@shared_task
def health_housekeeping_task() -> dict:
    return {**close_quiet_incidents(), "resent": resend_due()}


@shared_task
def prune_rollups_task() -> int:
    return prune_rollups()
