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
"""

from __future__ import annotations

import logging

import redis
from celery import current_app
from django.conf import settings

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
    client = _redis()
    if client is None:
        return
    try:
        client.delete(PREFIX + key)
    except redis.RedisError as exc:
        log.warning("could not clear wake-up flag %s (%s); it expires on its own", key, exc)
