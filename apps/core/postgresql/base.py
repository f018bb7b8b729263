"""Django's PostgreSQL backend with a health check that costs no round trip while the socket is quiet.

`CONN_HEALTH_CHECKS` makes Django run `SELECT 1` before the first query of every request on a reused
connection: a round trip that an API request pays for nothing almost every time. A connection that
the server ended (restart, `pg_terminate_backend`, idle timeout) or whose peer went away has something
to read on its socket (the server's FATAL message, or the end of the stream) or is known broken to
psycopg; only then is the `SELECT 1` run, and it decides as before. An idle connection on which
nothing arrived is usable, as the `SELECT 1` would have found.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg.pq import ConnStatus, TransactionStatus


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        params = super().get_connection_params()
        params.pop("jit", None)  # ours, not libpq's: see _configure_connection
        return params

    def _configure_connection(self, connection):
        """Django's, and PostgreSQL's JIT compiler off unless `DATABASE_URL` says `?jit=on` (console/env.py).

        The console's statements are short or read at most one row per node; JIT compiles a statement whose
        estimated cost passes `jit_above_cost`, and the estimates of set-returning functions (100 rows each) pass
        it: the overview's heatmap at 12,800 nodes spent 86 ms of its 530 ms compiling (EXPLAIN ANALYZE).
        Set once per connection (no statement of its own on a request)."""
        commit = super()._configure_connection(connection)
        if self.settings_dict["OPTIONS"].get("jit", "off") == "off":
            with connection.cursor() as cursor:
                cursor.execute("SET jit = off")
            commit = True
        return commit

    def is_usable(self) -> bool:
        conn = self.connection
        if conn is None or conn.closed or conn.broken:
            return False
        quiet = (
            conn.info.status == ConnStatus.OK
            and conn.info.transaction_status == TransactionStatus.IDLE
            and not _readable(conn.fileno())
        )
        return quiet or super().is_usable()


def _readable(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))
