"""`make demo`: migrate, seed, then run web + Celery worker + beat until Ctrl-C.

The broker is the embedded filesystem transport (no server); the database is an SQLite file.
Child processes are started and stopped by PID.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from apps.dashboard.demo import seed_demo

# The demo's simulator answers on the demo's own address (e.g. an exporter URL pattern pointing at
# http://127.0.0.1:8000/simulator/...): the demo's processes may call loopback, unless the caller chose otherwise.
DEMO_OUTBOUND_ALLOWED_NETWORKS = "127.0.0.0/8,::1/128"


def demo_environment(metrics_dir) -> dict[str, str]:
    """The environment of the demo's web, worker and beat processes."""
    return {
        "OUTBOUND_ALLOWED_NETWORKS": DEMO_OUTBOUND_ALLOWED_NETWORKS,
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }


class Command(BaseCommand):
    help = "Run the demo console: web, Celery worker and beat on an embedded broker and an SQLite file."

    def add_arguments(self, parser):
        parser.add_argument("--no-serve", action="store_true", help="migrate and seed, then exit")

    def handle(self, *args, **opts):
        port = os.environ.get("PORT", "8000")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise CommandError(f"PORT={port!r} is not a TCP port number")
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        for folder in ("broker", "broker-control"):
            (settings.VAR_DIR / folder).mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        password = os.environ.get("DEMO_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        logins = seed_demo("admin", password)
        if opts["no_serve"]:
            self.stdout.write("Demo database ready.")
            return

        python = sys.executable
        celery = [python, "-m", "celery", "-A", "console"]
        commands = {
            "web": [
                python,
                "-m",
                "gunicorn",
                "console.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--access-logfile",
                "-",
                "--log-level",
                "warning",
            ],
            # One worker process: the demo's SQLite file takes one writer at a time.
            "worker": [*celery, "worker", "--loglevel", "INFO", "--concurrency", "1", "--pool", "solo"],
            "beat": [*celery, "beat", "--loglevel", "INFO", "--schedule", str(settings.VAR_DIR / "celerybeat")],
        }
        # Web and worker processes add their request, task and backend-call timings up in one place for /metrics.
        metrics_dir = settings.VAR_DIR / "prometheus"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        env = demo_environment(metrics_dir)
        children: dict[str, subprocess.Popen] = {}
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            for name, command in commands.items():
                children[name] = subprocess.Popen(command, env=env)  # noqa: S603 (fixed argv)
            url = f"http://127.0.0.1:{port}/"
            table = "\n".join(f"    {user:<8} {what}" for user, what in logins)
            self.stdout.write(
                self.style.SUCCESS(
                    f"\nGPU console demo is running at {url}\n"
                    f"  Log in as admin / {password}\n"
                    f"  Other demo users (same password):\n{table}\n"
                    f"  API docs: {url}api/v1/docs/    Stop with Ctrl-C.\n"
                )
            )
            while not stopping:
                for name, child in children.items():
                    if child.poll() is not None:
                        self.stderr.write(f"{name} (pid {child.pid}) exited with {child.returncode}; stopping the demo")
                        stopping = True
                        break
                time.sleep(0.5)
        finally:
            for child in children.values():
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 15
            for child in children.values():
                try:
                    child.wait(timeout=max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            self.stdout.write("Demo stopped.")
