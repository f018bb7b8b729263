"""Shared fixtures. The suite runs on PostgreSQL only: `make test` sets DATABASE_URL."""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tests.oidc_provider import oidc_provider  # noqa: F401  (a session fixture: the real OpenID provider)
from tests.slurm_cluster import local_slurm  # noqa: F401  (a session fixture for every Slurm test)
from tests.utils.personas import Personas, build_personas

# Session fixtures for one shared outside service: under pytest-xdist (`make test` runs two processes), every
# test that uses one runs in the same process (an xdist group), as the whole suite did before. Two processes
# would each start the service, and each one's clean slate (the Slurm cluster's `scancel`) would end the
# other's jobs.
SHARED_ONCE = {"local_slurm": "slurm", "oidc_provider": "oidc"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its own hook names items by group)
def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture, group in SHARED_ONCE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
                break


def _broker_of_this_worker() -> None:
    """Under pytest-xdist each process gets a Redis database of its own (gw0: the given one minus 1, gw1: minus
    2, ...), so one process's live Celery worker never takes the other's tasks and a purge never drops them."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not worker.startswith("gw") or not url.startswith("redis://"):
        return
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0) - 1 - int(worker[2:])
    if database < 0:
        raise pytest.UsageError(f"CELERY_BROKER_URL={url}: too low a Redis database for xdist worker {worker}")
    url = parts._replace(path=f"/{database}").geturl()
    os.environ["CELERY_BROKER_URL"] = url  # for the subprocesses tests start
    settings.CELERY_BROKER_URL = url
    from console.celery import app

    app.conf.update(CELERY_BROKER_URL=url)
    assert app.conf.broker_url == url


def pytest_configure(config):
    _broker_of_this_worker()
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
    if transactional:
        request.getfixturevalue("transactional_db")
        _seed_reference_data()
    elif marker is not None or "db" in request.fixturenames:
        # Under pytest-xdist a process may run a transactional test (whose flush empties every table) before
        # this one: put the rows back if they are gone. In one process, pytest-django orders these tests first.
        with request.getfixturevalue("django_db_blocker").unblock():
            seed_reference_data_if_gone()


def seed_reference_data_if_gone() -> None:
    from apps.fleet.models import GpuModel

    if not GpuModel.objects.exists():
        _seed_reference_data()


def _seed_reference_data() -> None:
    from importlib import import_module

    from django.apps import apps

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
