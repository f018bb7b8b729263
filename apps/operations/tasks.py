"""Celery tasks for operations: they take ids and call the runner or a service."""

from celery import shared_task

from apps.operations.runner import execute_operation
from apps.operations.services import prune_operations


@shared_task(acks_late=True)
def run_operation_task(operation_id: int) -> bool:
    return execute_operation(operation_id)


@shared_task
def prune_operations_task(older_than_days: int = 90) -> int:
    return prune_operations(older_than_days)
