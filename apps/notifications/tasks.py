"""Celery tasks for notifications: send one (they take ids and call the service)."""

from celery import shared_task

from apps.notifications.services import send_notification


# The name it had when notifications belonged to the health app: messages already queued under it still run.
@shared_task(acks_late=True, name="apps.health.tasks.send_notification_task")
def send_notification_task(notification_id: int) -> str:
    return send_notification(notification_id)
