"""Shared fixtures. The suite runs on PostgreSQL only: `make test` sets DATABASE_URL."""

from __future__ import annotations

import ipaddress

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tests.oidc_provider import oidc_provider  # noqa: F401  (a session fixture: the real OpenID provider)
from tests.slurm_cluster import local_slurm  # noqa: F401  (a session fixture for every Slurm test)
from tests.utils.personas import Personas, build_personas


def pytest_configure(config):
    engine = settings.DATABASES["default"]["ENGINE"]
    if engine != "apps.core.postgresql":
        raise pytest.UsageError(
            "The test suite runs on PostgreSQL. Use `make test`, or set "
            "DATABASE_URL=postgres://postgres@127.0.0.1:5432/console before running pytest."
        )
    # Password hashing is deliberately slow; tests log in hundreds of times and test no hashing strength.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Each test builds its own fleet: capacity must be read fresh, not from another test's cache.
    settings.ADMISSION_CAPACITY_CACHE_S = 0
    settings.REFERENCE_CACHE_S = 0
    settings.OVERVIEW_CACHE_S = 0
    # The outbound policy (apps/core/outbound.py) refuses loopback; the suite's fake servers (the Kubernetes
    # fake, slurmrestd, webhook receivers, exporters) listen on 127.0.0.1, so the suite allows loopback here, in
    # this one place. tests/core/test_outbound.py puts the production default (nothing) back to prove refusals.
    settings.OUTBOUND_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")]

    # The suite makes thousands of API calls in seconds: no API rate limits, except where a test sets them
    # (tests/api/test_throttling.py). The log-in lockout keeps its production settings.
    settings.API_THROTTLE_RATES = dict.fromkeys(settings.API_THROTTLE_RATES)


def set_celery_eager(value: bool) -> None:
    """Switch eager mode. The app reads Django settings with the CELERY_ namespace, so keys carry it too."""
    from console.celery import app

    app.conf.update(CELERY_TASK_ALWAYS_EAGER=value)
    assert app.conf.task_always_eager is value


@pytest.fixture(autouse=True)
def _eager_celery(request):
    """Unit tests run Celery tasks eagerly; tests marked `integration` talk to a real worker instead."""
    eager = request.node.get_closest_marker("integration") is None
    set_celery_eager(eager)
    yield
    set_celery_eager(False)


@pytest.fixture(autouse=True)
def _reference_data(request):
    """Transactional tests flush the database afterwards, seed rows included: put the GPU catalog and the
    priority tiers (seeded by migrations) back before each one."""
    marker = request.node.get_closest_marker("django_db")
    transactional = (marker is not None and marker.kwargs.get("transaction")) or bool(
        {"transactional_db", "live_server"} & set(request.fixturenames)
    )
    if not transactional:
        return
    from importlib import import_module

    from django.apps import apps

    request.getfixturevalue("transactional_db")
    import_module("apps.fleet.migrations.0002_gpu_catalog").seed(apps, None)
    import_module("apps.tenancy.migrations.0003_priority_tiers").seed(apps, None)


@pytest.fixture
def personas(db) -> Personas:
    return build_personas()


@pytest.fixture
def api():
    """An API client factory: api(user) logs in by session, api(token=raw) uses a bearer token, api() is anonymous."""

    def make(user=None, token: str | None = None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user=None)
            client.force_login(user)
        if token is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return client

    return make


@pytest.fixture(autouse=True)
def _default_language_afterwards():
    """The test client leaves the last request's language active in the thread; a test that read a page in
    Chinese must not make the next test's messages Chinese."""
    yield
    from django.utils import translation

    translation.deactivate()
