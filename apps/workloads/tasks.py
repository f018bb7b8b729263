"""Celery tasks for workloads: drain the outbox, carry out one outbox entry; the periodic tick."""

from celery import shared_task


@shared_task(acks_late=True)
def process_outbox_task(entry_id: int) -> str:
    from apps.workloads.services.outbox import process_outbox_entry

    return process_outbox_entry(entry_id)


@shared_task
def drain_outbox_task() -> int:
    """Woken after submissions commit (coalesced: one queued run at a time); fans out one task per due entry."""
    from apps.core.wakeup import woken
    from apps.workloads.services.outbox import OUTBOX_WAKE, drain_outbox

    woken(OUTBOX_WAKE)
    return drain_outbox()


@shared_task
def workloads_tick_task() -> dict:
    from apps.workloads.services.reconcile import tick

    return tick()
