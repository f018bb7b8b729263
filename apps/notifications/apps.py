from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """Notification channels (webhook, e-mail) and the messages sent to them, for any app that has news."""

    name = "apps.notifications"
    label = "notifications"
    verbose_name = "Notifications"
