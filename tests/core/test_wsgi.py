"""The WSGI module prepares a worker before its first request, and never needs the broker to start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
import console.wsgi
import gc
print(json.dumps({
    "frozen": gc.get_freeze_count(),
    "loaded": [m for m in ("kombu.transport.redis", "celery.app.task", "celery.events.dispatcher") if m in sys.modules],
}))
"""


def test_a_worker_loads_task_publishing_at_start_without_connecting_to_the_broker():
    # Nothing listens on port 1: had the module connected to the broker, the import would have raised.
    env = {
        **os.environ,
        "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        # The web server refuses a weak key when DEBUG is off (tests/core/test_secret_key.py).
        "SECRET_KEY": "k3Jx9-qP0vT7wZ2mB5nR8yL1cF4hD6gS0aE3uI7oK9jN2xV5bM8",
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["loaded"] == ["kombu.transport.redis", "celery.app.task", "celery.events.dispatcher"]
    assert probe["frozen"] > 10_000  # the loaded modules' objects are out of the collector's sight
