"""Refuse a weak SECRET_KEY when DEBUG is off.

A system check (every `manage.py` command that runs checks: migrate, runserver, check) and the WSGI/ASGI
entry points (`refuse_weak_secret_key`, so gunicorn refuses to start too) share one rule: with DEBUG
off the key must be at least 50 characters, with at least 5 different ones, and not a value published in
this repository or in Django's templates. `make demo` runs with DEBUG=1 and is unaffected.
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

MIN_SECRET_KEY_LENGTH = 50
# Keys printed in this repository (settings, Makefile, Dockerfile, docs) or well-known placeholders.
KNOWN_KEYS = {
    "insecure-demo-key-change-me",
    "test-only-secret",
    "bench-only",
    "collectstatic-build-only-not-secret",
    "i18n-extraction-only",
    "change-me",
    "changeme",
    "secret",
}
KNOWN_PREFIXES = ("django-insecure-", "insecure-", "change-me", "changeme")


def secret_key_problem(secret_key: str, debug: bool) -> str | None:
    """Why `secret_key` must not run a console with DEBUG off, or None."""
    if debug:
        return None
    key = secret_key or ""
    if key.strip().lower() in KNOWN_KEYS or key.lower().startswith(KNOWN_PREFIXES):
        return "SECRET_KEY is a published demo/example value; generate one, e.g. `openssl rand -hex 32`."
    if len(key) < MIN_SECRET_KEY_LENGTH or len(set(key)) < 5:
        return (
            f"SECRET_KEY is too weak ({len(key)} characters): with DEBUG off it needs at least "
            f"{MIN_SECRET_KEY_LENGTH} characters and 5 different ones; generate one, e.g. `openssl rand -hex 32`."
        )
    return None


@register()
def check_secret_key(app_configs=None, **kwargs) -> list[Error]:
    problem = secret_key_problem(settings.SECRET_KEY, settings.DEBUG)
    return [Error(problem, id="console.E001")] if problem else []


def refuse_weak_secret_key() -> None:
    """Stop a web server process before it serves anything with a weak key."""
    problem = secret_key_problem(settings.SECRET_KEY, settings.DEBUG)
    if problem:
        raise ImproperlyConfigured(problem)
