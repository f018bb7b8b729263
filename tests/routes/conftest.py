"""The route matrix's world: built once for the whole package, rolled back at its end."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client

from tests.conftest import seed_reference_data_if_gone, set_celery_eager
from tests.routes.matrix import fingerprint
from tests.routes.world import World, build_world, login_sessions


@pytest.fixture(scope="package")
def world(django_db_setup, django_db_blocker) -> World:
    with django_db_blocker.unblock():
        set_celery_eager(True)
        try:
            with transaction.atomic():
                seed_reference_data_if_gone()  # a transactional test of this process may have flushed them
                built = build_world()
                login_sessions(built, Client)
                built.fingerprint = fingerprint()
                yield built
                transaction.set_rollback(True)
        finally:
            set_celery_eager(False)


@pytest.fixture
def db(world):
    """This package's `db`: each test runs in a savepoint of the world's transaction, rolled back after it.

    It stands in for pytest-django's own (a Django TestCase set up and torn down around every test), which
    costs more than most of the requests these thousands of cases make; the isolation is the same.
    """
    savepoint = transaction.savepoint()
    yield
    transaction.savepoint_rollback(savepoint)
    transaction.set_rollback(False)  # back at the savepoint: the world's transaction is sound again
