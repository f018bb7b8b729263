"""Periodic chargeback work: meter every cluster's usage, settle fault credits, check spend budgets."""

from celery import shared_task

from apps.chargeback.budgets import check_budgets
from apps.chargeback.credits import settle_credits
from apps.chargeback.metering import meter_all_clusters


@shared_task
def meter_usage_task() -> dict:
    """One round: meter (idempotent per cluster watermark), then credits and budgets on the fresh records."""
    results = meter_all_clusters()
    return {
        "clusters": [
            {"cluster": r.cluster, "ok": r.ok, "inserted": r.inserted, "late": r.late, "error": r.error}
            for r in results
        ],
        "credits_settled": settle_credits(),
        "budget_alerts": check_budgets(),
    }
