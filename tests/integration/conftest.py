"""A real Celery worker on Redis for the integration tests (tests/utils/celery_worker.py, shared with tests/cli)."""

from tests.utils.celery_worker import live_celery, worker  # noqa: F401  (fixtures)
