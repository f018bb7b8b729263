"""Celery tasks of the tenancy app: the periodic admission pass."""

from celery import shared_task


@shared_task
def admission_pass_task() -> dict:
    from apps.tenancy.services.admissions import run_admission_pass

    return run_admission_pass()
