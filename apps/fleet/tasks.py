"""Periodic fleet work: inventory sync (one task per enabled cluster) and the Kubernetes quota drift report."""

from celery import shared_task

from apps.fleet.models import Cluster
from apps.fleet.services import sync_inventory


def fan_out(task) -> int:
    """Send `task` once per cluster that syncs (each to whichever worker takes it): how periodic per-cluster work
    starts, never one task for the whole fleet. Returns how many were sent."""
    ids = list(Cluster.objects.filter(sync_enabled=True).values_list("id", flat=True))
    for cluster_id in ids:
        task.delay(cluster_id)
    return len(ids)


@shared_task
def sync_all_clusters_task() -> int:
    return fan_out(sync_cluster_task)


@shared_task(acks_late=True)
def sync_cluster_task(cluster_id: int) -> dict:
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
