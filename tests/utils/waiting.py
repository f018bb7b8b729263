"""Waiting on a condition that another process (a real Celery worker) makes true."""

from __future__ import annotations

import time


def wait_until(predicate, timeout: float = 15.0) -> bool:
    """Poll `predicate` every 50 ms until it is true (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
