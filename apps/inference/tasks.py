"""Celery tasks of the inference telemetry: the periodic scrape and the retention prune."""

from celery import shared_task


@shared_task
def scrape_services_task() -> dict:
    from apps.inference.scrape import scrape_services

    return scrape_services()


@shared_task
def prune_telemetry_task() -> int:
    from apps.inference.services import prune_samples

    return prune_samples()
