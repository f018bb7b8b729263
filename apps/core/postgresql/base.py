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
