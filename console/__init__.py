"""Django project package: settings, URLs, the Celery app and the WSGI/ASGI entry points."""

from console.celery import app as celery_app

__all__ = ("celery_app",)
