"""ASGI entry point."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
application = get_asgi_application()

from apps.core.checks import refuse_weak_secret_key  # noqa: E402  (after Django is set up)

refuse_weak_secret_key()
