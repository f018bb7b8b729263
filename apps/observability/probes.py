"""Probes for running the console itself: /healthz (the process answers) and /readyz (what it depends on).

/readyz checks the database and the Celery broker, and reports each cluster's last contact; it
answers 503 naming what failed when the database or the broker does not answer, so a Kubernetes
readiness probe takes the pod out of rotation. A cluster whose last sync failed does not make the
console unready (its pages still work): it is listed under `clusters` with its error.
"""

from __future__ import annotations

import time

from celery import current_app
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

BROKER_TIMEOUT_S = 2.0


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _check(name: str, probe) -> dict:
    start = time.perf_counter()
    try:
        detail = probe() or ""
    except Exception as exc:  # any failure is what the probe reports
        return {"name": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"name": name, "ok": True, "ms": round((time.perf_counter() - start) * 1000, 1), "detail": detail}


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return connection.vendor


def _broker() -> str:
    # The process's Celery app (console/celery.py makes it the default); observability sits below console.
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_S)
        return conn.transport_cls if isinstance(conn.transport_cls, str) else conn.transport.driver_type


def _clusters() -> list[dict]:
    from apps.fleet.models import Cluster

    now = timezone.now()
    return [
        {
            "name": c.name,
            "kind": c.kind,
            "status": c.status,
            "last_contact_s": round((now - c.last_sync_at).total_seconds()) if c.last_sync_at else None,
            "error": c.last_error if c.status == "error" else "",
        }
        for c in Cluster.objects.only("name", "kind", "status", "last_sync_at", "last_error")
    ]


@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    checks = [_check("database", _database), _check("broker", _broker)]
    ready = all(c["ok"] for c in checks)
    body = {"status": "ready" if ready else "unready", "checks": checks}
    if checks[0]["ok"]:
        body["clusters"] = _clusters()
    return JsonResponse(body, status=200 if ready else 503)
