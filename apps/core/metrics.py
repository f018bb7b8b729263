"""The console's process metrics (request, task and backend-call latency), recorded where they happen.

They live in prometheus_client's default registry. Under gunicorn and Celery each process keeps its
own; set PROMETHEUS_MULTIPROC_DIR (an empty directory shared by the web and worker processes of a
host, cleared at start: `make demo` does this) so /metrics adds them up across processes. Labels are
bounded: view names from the URL patterns, task names, cluster names and backend operations.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

REQUEST_SECONDS = Histogram(
    "gpuc_http_request_duration_seconds",
    "Console HTTP request latency by view",
    ["view", "method", "status"],
    buckets=LATENCY_BUCKETS,
)
TASK_SECONDS = Histogram(
    "gpuc_celery_task_duration_seconds",
    "Celery task run time by task",
    ["task", "outcome"],
    buckets=LATENCY_BUCKETS,
)
TASK_LATENCY_SECONDS = Histogram(
    "gpuc_celery_task_queue_seconds",
    "Time from a task's publish to its start, by task",
    ["task"],
    buckets=LATENCY_BUCKETS,
)
BACKEND_CALL_SECONDS = Histogram(
    "gpuc_backend_call_duration_seconds",
    "Backend (Kubernetes, Slurm, simulator) call latency by cluster and operation",
    ["cluster", "operation"],
    buckets=LATENCY_BUCKETS,
)
BACKEND_CALL_ERRORS = Counter(
    "gpuc_backend_call_errors",
    "Backend calls that raised, by cluster, operation and whether a retry may help",
    ["cluster", "operation", "retryable"],
)


class RequestMetricsMiddleware:
    """Time every request by the view that served it (404s and unmatched paths as `unmatched`)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        start = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name or match._func_path) if match else "unmatched"
        REQUEST_SECONDS.labels(view, request.method, f"{response.status_code // 100}xx").observe(
            time.perf_counter() - start
        )
        return response


def timed_call(cluster: str, operation: str, call, *args, **kwargs):
    """Run one backend call, recording its latency and, if it raises, the error."""
    start = time.perf_counter()
    try:
        return call(*args, **kwargs)
    except Exception as exc:
        BACKEND_CALL_ERRORS.labels(cluster, operation, str(bool(getattr(exc, "retryable", False))).lower()).inc()
        raise
    finally:
        BACKEND_CALL_SECONDS.labels(cluster, operation).observe(time.perf_counter() - start)
