"""Short-lived, per-process copies of reference data that admins change rarely (GPU models, priority tiers).

A submission burst need not read the GPU catalog and the tier table on every request. Each process
re-reads an entry at most every `REFERENCE_CACHE_S` seconds (0 turns the cache off, as the tests
do); the process that changes an entry drops its copy at once, the others within that time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings

T = TypeVar("T")
_entries: dict[str, tuple[float, object]] = {}


def cached(key: str, load: Callable[[], T], ttl: float | None = None) -> T:
    """`load()`'s result, reused for `ttl` seconds (default `REFERENCE_CACHE_S`; 0: always loaded afresh)."""
    now = time.monotonic()
    hit = _entries.get(key)
    if hit is None or now - hit[0] >= (settings.REFERENCE_CACHE_S if ttl is None else ttl):
        hit = (now, load())
        _entries[key] = hit
    return hit[1]  # type: ignore[return-value]


def forget(key: str) -> None:
    _entries.pop(key, None)
