"""The per-request connection health check: no round trip on a quiet connection, a real check otherwise."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def _count_cursors(monkeypatch) -> list[int]:
    opened: list[int] = []
    original = psycopg.Connection.cursor

    def counting(self, *args, **kwargs):
        opened.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "cursor", counting)
    return opened


def _fresh_request() -> None:
    connection.ensure_connection()
    connection.health_check_done = False  # what a new request does (close_if_unusable_or_obsolete)


def test_a_quiet_connection_is_usable_without_a_query(monkeypatch):
    _fresh_request()
    opened = _count_cursors(monkeypatch)
    connection.close_if_health_check_failed()
    assert connection.connection is not None
    assert opened == []  # no SELECT 1


def test_a_connection_the_server_ended_is_closed_and_the_next_query_reconnects(monkeypatch):
    _fresh_request()
    old_pid = connection.connection.info.backend_pid
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as admin:
        # With a timeout, it returns once the backend has exited: its FATAL message and EOF are on our socket.
        assert admin.execute("SELECT pg_terminate_backend(%s, 10000)", [old_pid]).fetchone() == (True,)
    opened = _count_cursors(monkeypatch)
    connection.close_if_health_check_failed()
    assert opened == [1]  # something to read: the real check ran, failed
    assert connection.connection is None  # and the dead connection was dropped
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != old_pid


def test_a_connection_inside_a_transaction_gets_the_real_check(monkeypatch):
    _fresh_request()
    connection.connection.execute("BEGIN")
    try:
        opened = _count_cursors(monkeypatch)
        assert connection.is_usable()
        assert opened == [1]
    finally:
        connection.connection.execute("ROLLBACK")


@pytest.mark.django_db
def test_the_jit_compiler_is_off_on_the_consoles_connections():
    """PostgreSQL's JIT compiled the overview's heatmap at 12,800 nodes for 86 ms of its 530 (issue 23)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"
