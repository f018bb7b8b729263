"""Coalesced wake-ups: many commits, one queued task.

A request that leaves work for the worker (an outbox row, say) wakes the task that does it. Queuing a
Celery message per request costs the request about a millisecond; under load, most of those messages
would find nothing their predecessor had not already done. So a wake-up first takes a flag in Redis
(`SET key NX EX ttl`) and queues the task only if the flag was free; the task clears the flag before it
looks for work. Whatever was committed before a wake-up that found the flag taken is seen by the queued
task, because that task had not cleared the flag yet, so it has not looked yet.

Where the broker is not Redis (the demo's embedded broker) or tasks run eagerly (tests), every wake-up
queues the task. If Redis fails, the task is queued anyway; the flag's expiry is the safety net for a
task that was lost after taking it, and so is the periodic sweep that each such task also runs on.

A writer whose work goes out in one PostgreSQL statement can raise the flag in that statement instead
(`raise_in_statement`, the `WakeFlag` row of the key), sparing the request its round trip to Redis: the
statement's upsert raises the flag if it is clear (or expired) and says whether it did, and the row's lock,
held to the writer's COMMIT, keeps the woken task from clearing the flag until the work is committed: a
task that clears it then looks after the commit, so a writer that found the flag raised may leave the
wake-up to it. `woken` clears both flags.
"""

from __future__ import annotations

import logging

import redis
from celery import current_app
from django.conf import settings
from django.db import connection

log = logging.getLogger(__name__)
PREFIX = "gpuc:wake:"
_clients: dict[str, redis.Redis] = {}


def _redis() -> redis.Redis | None:
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return None
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    return _clients[url]


def wake(task, key: str, ttl_s: int = 30) -> bool:
    """Queue `task` (no arguments) unless a wake-up under `key` is already queued. True if it was queued."""
    client = None if current_app.conf.task_always_eager else _redis()
    if client is not None:
        try:
            if not client.set(PREFIX + key, b"1", nx=True, ex=ttl_s):
                return False
        except redis.RedisError as exc:
            log.warning("wake-up flag %s unavailable (%s); queuing the task anyway", key, exc)
    task.delay()
    return True


def woken(key: str) -> None:
    """Called by the task before it looks for work: later wake-ups queue a new run."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # waits for a writer that holds the row to commit (raise_in_statement)
            cursor.execute("UPDATE core_wakeflag SET raised_at = NULL WHERE key = %s AND raised_at IS NOT NULL", [key])
    client = _redis()
    if client is None:
        return
    try:
        client.delete(PREFIX + key)
    except redis.RedisError as exc:
        log.warning("could not clear wake-up flag %s (%s); it expires on its own", key, exc)


# Rows come from the guard `g` of `apps.core.inserts.insert_rows_if_locked` (none when it refuses: nothing raised).
# `now()` is the transaction's start: the flag holds it exactly when this transaction raised it.
_RAISE_SQL = (
    "INSERT INTO core_wakeflag (key, raised_at) SELECT %s, now() FROM g ON CONFLICT (key) DO UPDATE SET raised_at = "
    "CASE WHEN core_wakeflag.raised_at IS NULL OR core_wakeflag.raised_at < now() - make_interval(secs => %s) "
    "THEN now() ELSE core_wakeflag.raised_at END RETURNING raised_at = now()"
)


def raise_in_statement(key: str, ttl_s: int = 30) -> tuple[str, tuple]:
    """The statement (and its parameters) that raises `key`'s flag inside `insert_rows_if_locked`'s statement, as
    its `also`; its value is True when it raised the flag: pass it to `wake_if_raised` after the COMMIT."""
    return _RAISE_SQL, (key, ttl_s)


def wake_if_raised(task, raised: bool) -> bool:
    """After the COMMIT of a statement that ran `raise_in_statement`: queue `task` if that statement raised the
    flag (a flag found raised has its task queued and not yet looking). True if it was queued."""
    if raised or current_app.conf.task_always_eager:
        task.delay()
        return True
    return False
