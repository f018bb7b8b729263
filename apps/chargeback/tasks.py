"""Periodic chargeback work: meter every cluster's usage (one task per cluster), settle fault credits, check spend
budgets."""

from celery import shared_task

from apps.chargeback.budgets import check_budgets
from apps.chargeback.credits import settle_credits
from apps.chargeback.metering import meter_cluster
from apps.fleet import stamps
from apps.fleet.models import Cluster
from apps.fleet.tasks import fan_out


@shared_task
def meter_usage_task() -> dict:
    """Beat, once a round: one metering task per cluster (queue "metering", each on whichever worker takes it; none
    for a cluster whose last one has not finished: fleet.tasks.fan_out), then credits and budgets on what is recorded
    so far. Metering is idempotent per cluster watermark, so the
    credits and budgets see this round's records in the next round at the latest (one interval, 60 s)."""
    sent = fan_out(meter_cluster_task, Cluster.objects.all())
    return {"clusters": sent, "credits_settled": settle_credits(), "budget_alerts": check_budgets()}


@shared_task(acks_late=True)
def meter_cluster_task(cluster_id: int) -> dict:
    with stamps.running(meter_cluster_task.name, cluster_id):
        r = meter_cluster(cluster_id)
    return {"cluster": r.cluster, "ok": r.ok, "inserted": r.inserted, "late": r.late, "error": r.error}
