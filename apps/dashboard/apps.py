from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """Pages that compose the other apps (the home page now; the fleet overview later)."""

    name = "apps.dashboard"
    label = "dashboard"
