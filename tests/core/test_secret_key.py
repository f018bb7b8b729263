"""A weak SECRET_KEY stops the console when DEBUG is off (issue 20: "the demo's SECRET_KEY (and even `x`) is
accepted"); `make demo` (DEBUG=1) is unaffected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from apps.core.checks import secret_key_problem

ROOT = Path(__file__).resolve().parents[2]
STRONG = "k3Jx9-qP0vT7wZ2mB5nR8yL1cF4hD6gS0aE3uI7oK9jN2xV5bM8"  # 52 characters, made up for this test


@pytest.mark.parametrize(
    "key",
    ["x", "", "insecure-demo-key-change-me", "test-only-secret", "django-insecure-" + "a1b2c3d4e5" * 5, "a" * 60],
)
def test_weak_or_published_keys_are_refused_without_debug(key):
    assert secret_key_problem(key, debug=False)
    assert secret_key_problem(key, debug=True) is None


def test_a_long_random_key_is_accepted():
    assert len(STRONG) >= 50 and secret_key_problem(STRONG, debug=False) is None


def run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key != "DEBUG"}
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**environment, "DJANGO_SETTINGS_MODULE": "console.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_manage_py_commands_refuse_the_demo_key_without_debug():
    result = run(["manage.py", "check"], SECRET_KEY="insecure-demo-key-change-me")
    assert result.returncode != 0
    assert "console.E001" in result.stderr and "SECRET_KEY is a published demo/example value" in result.stderr


def test_the_demo_with_debug_on_is_unaffected():
    result = run(["manage.py", "check"], DEBUG="1", SECRET_KEY="insecure-demo-key-change-me")
    assert result.returncode == 0, result.stderr
    assert run(["manage.py", "check"], DEBUG="1").returncode == 0  # make demo sets no key at all


def test_the_web_server_refuses_to_start_with_a_short_key():
    result = run(["-c", "import console.wsgi"], SECRET_KEY="x", CELERY_BROKER_URL="redis://127.0.0.1:1/0")
    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is too weak (1 characters)" in result.stderr
    assert run(["-c", "import console.asgi"], SECRET_KEY="x").returncode != 0
    strong = run(["-c", "import console.asgi"], SECRET_KEY=STRONG)
    assert strong.returncode == 0, strong.stderr
