"""Periodic chargeback work: meter every cluster's usage (one task per cluster), settle fault credits, check spend
budgets."""

from celery import shared_task

from apps.chargeback.budgets import check_budgets
from apps.chargeback.credits import settle_credits
from apps.chargeback.metering import meter_cluster
from apps.fleet.models import Cluster


@shared_task
def meter_usage_task() -> dict:
    """Beat, once a round: one metering task per cluster (queue "metering", each on whichever worker takes it),
    then credits and budgets on what is recorded so far. Metering is idempotent per cluster watermark, so the
    credits and budgets see this round's records in the next round at the latest (one interval, 60 s)."""
    ids = list(Cluster.objects.order_by("pk").values_list("pk", flat=True))
    for cluster_id in ids:
        meter_cluster_task.delay(cluster_id)
    return {"clusters": len(ids), "credits_settled": settle_credits(), "budget_alerts": check_budgets()}


@shared_task(acks_late=True)
def meter_cluster_task(cluster_id: int) -> dict:
    r = meter_cluster(cluster_id)
    return {"cluster": r.cluster, "ok": r.ok, "inserted": r.inserted, "late": r.late, "error": r.error}
