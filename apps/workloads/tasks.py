"""Celery tasks for workloads: carry out one outbox entry; the periodic tick."""

from celery import shared_task


@shared_task(acks_late=True)
def process_outbox_task(entry_id: int) -> str:
    from apps.workloads.services import process_outbox_entry

    return process_outbox_entry(entry_id)


@shared_task
def workloads_tick_task() -> dict:
    from apps.workloads.services import tick

    return tick()
