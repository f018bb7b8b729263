"""Periodic fleet work: inventory sync (one task per enabled cluster) and the Kubernetes quota drift report."""

import logging

from celery import shared_task

from apps.fleet import stamps
from apps.fleet.models import Cluster
from apps.fleet.services import sync_inventory

logger = logging.getLogger(__name__)


def fan_out(task, clusters=None) -> int:
    """Send `task` once per cluster (`clusters`, by default those that sync; each to whichever worker takes it): how
    periodic per-cluster work starts, never one task for the whole fleet. A cluster whose last `task` is still queued
    or running gets none (apps/fleet/stamps.py: claimed by compare-and-set, cleared by the task when it ends, expired
    after FAN_OUT_STAMP_EXPIRY_S), so workers that fall behind run each cluster's work back to back instead of
    growing a backlog. The task wraps its work in `stamps.running`. Returns how many were sent."""
    if clusters is None:
        clusters = Cluster.objects.filter(sync_enabled=True)
    ids = list(clusters.order_by("pk").values_list("pk", flat=True))
    claimed = stamps.claim(task.name, ids)
    if len(claimed) < len(ids):
        held = len(ids) - len(claimed)
        logger.info("%s: %d of %d clusters still have one queued or running", task.name, held, len(ids))
    for sent, cluster_id in enumerate(claimed):
        try:
            task.delay(cluster_id)
        except Exception:
            stamps.release(task.name, claimed[sent:])
            raise
    return len(claimed)


@shared_task
def sync_all_clusters_task() -> int:
    return fan_out(sync_cluster_task)


@shared_task(acks_late=True)
def sync_cluster_task(cluster_id: int) -> dict:
    with stamps.running(sync_cluster_task.name, cluster_id):
        result = sync_inventory(cluster_id)
    return {"ok": result.ok, "nodes": result.nodes, "error": result.error, "skipped": result.skipped}


@shared_task
def quota_drift_all_task() -> int:
    """A drift report operation per enabled cluster whose backend reports quota drift (Kubernetes), started by
    the system."""
    from apps.backends.registry import get_backend
    from apps.operations.services import start_operation

    clusters = [c for c in Cluster.objects.filter(sync_enabled=True) if hasattr(get_backend(c), "quota_drift")]
    for cluster in clusters:
        start_operation(
            None,
            "tenancy.quota-drift",
            target=cluster,
            params={"cluster_id": cluster.pk},
            reason="periodic drift report",
        )
    return len(clusters)
