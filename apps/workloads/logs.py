"""A workload's logs: streamed from its cluster, and where else they are (the cluster's log system, a command).

The console does not store logs. `open_log_stream` asks the cluster's backend for the log as it is now
(`Backend.stream_logs`: the pods' logs through the Kubernetes API server, the sbatch output file through Slurm's
login node, the simulated run) and hands back lines to send as they come: the API's
`GET /api/v1/workloads/{id}/logs/` and the logs page's live tail read it. Everything that can be refused is refused
before the first line, as an API error (a bad `worker`, nothing started yet, a cluster that cannot stream);
a followed log ends when the workload stops, or after `LOGS_FOLLOW_MAX_S`.

A cluster's `connection.logs_url` (a template) points at the log system its operators already use (Grafana Loki,
Kibana, OpenSearch ...): it is where the logs of pods long gone are. Without one, the cluster's backend says how
to read them on the cluster (`Backend.workload_logs`: kubectl, tail of the sbatch output file). A cluster whose
`connection.stream_logs` is false is never asked for its logs: the endpoint answers 501 with those.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

from django.conf import settings
from django.utils.translation import gettext as _

from apps.backends.base import (
    BackendError,
    LogsNotReady,
    LogsUnavailable,
    LogWorkerError,
    RetryableBackendError,
)
from apps.backends.registry import get_backend
from apps.backends.types import LogSource
from apps.core.errors import Conflict, InvalidInput, ServiceError
from apps.fleet.links import url_template_error
from apps.workloads.models import Workload

log = logging.getLogger(__name__)

TAIL_DEFAULT = 200
TAIL_MAX = 10_000
RETRY_NOT_READY_S = 10  # a pending pod or job: soon worth asking again
RETRY_BACKEND_S = 30
BROKEN_PREFIX = "[gpu-console] "  # the one line the console adds to a log: why the stream broke off


@dataclass
class Logs:
    url: str = ""  # an external log system's page for this workload
    command: str = ""  # how to read the logs on the cluster when there is no log system configured
    lines: list[str] = field(default_factory=list)  # the log itself (simulated clusters)


def _namespace(workload: Workload) -> str:
    from apps.tenancy.models import QueueBinding

    binding = QueueBinding.objects.filter(queue=workload.queue, cluster=workload.cluster).first()
    return ((binding.namespaces if binding else []) or [workload.tenant.slug])[0]


def logs_for(workload: Workload) -> Logs:
    cluster = workload.cluster
    connection = cluster.connection or {}
    backend = get_backend(cluster)
    namespace = _namespace(workload) if backend.namespaced else ""
    template = connection.get("logs_url", "")
    if template and not url_template_error(template):
        values = {
            "name": workload.backend_name,
            "namespace": namespace,
            "workload_id": str(workload.pk),
            "tenant": workload.tenant.slug,
            "queue": workload.queue.full_name,
            "cluster": cluster.name,
        }
        return Logs(url=template.format(**{k: quote(v, safe="") for k, v in values.items()}))
    found = backend.workload_logs(workload.backend_name, str(workload.pk), namespace)
    return Logs(command=found.command, lines=found.lines)


def worker_count(workload: Workload) -> int:
    """How many workers the `worker` parameter chooses among: a training job's workers, an inference service's
    replicas (its autoscaling maximum when that is higher)."""
    spec = workload.spec or {}
    if workload.kind == "inference":
        count = _whole(spec.get("replicas"))
        scaling = spec.get("autoscaling") or {}
        if isinstance(scaling, dict) and scaling.get("enabled"):
            count = max(count, _whole(scaling.get("max_replicas")))
        return count
    return _whole(spec.get("workers"))


def _whole(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def streams_logs(workload: Workload) -> bool:
    """Whether the console asks the workload's cluster for its logs (`connection.stream_logs`, default true)."""
    return (workload.cluster.connection or {}).get("stream_logs", True) is not False


def log_source(workload: Workload) -> LogSource:
    backend = get_backend(workload.cluster)
    return LogSource(
        name=workload.backend_name,
        workload_id=str(workload.pk),
        kind=workload.kind,
        workers=worker_count(workload),
        namespace=_namespace(workload) if backend.namespaced else "",
    )


#
# Errors: the API's JSON answers for a log that cannot be streamed
#


class LogsNotStreamable(ServiceError):
    status_code = 501
    code = "logs_not_streamable"


class LogsBackendFailed(ServiceError):
    status_code = 502
    code = "backend_error"


class LogsBackendUnavailable(ServiceError):
    status_code = 503
    code = "backend_unavailable"
    retry_after = RETRY_BACKEND_S


class TooManyLogStreams(ServiceError):
    status_code = 429
    code = "too_many_log_streams"
    retry_after = RETRY_BACKEND_S


def _elsewhere(workload: Workload) -> dict:
    """Where the logs can be read besides the console: the cluster's log system, or a command on the cluster."""
    logs = logs_for(workload)
    return {key: value for key, value in (("url", logs.url), ("command", logs.command)) if value}


def _where_else(found: dict) -> str:
    if found.get("url"):
        return " " + _("Its cluster's log system has them: %(url)s") % {"url": found["url"]}
    if found.get("command"):
        return " " + _("Read them on the cluster: %(command)s") % {"command": found["command"]}
    return ""


#
# Following: a process serves at most LOGS_FOLLOW_MAX_STREAMS followed logs at once
#

_following = threading.BoundedSemaphore(1)  # replaced by the settings' size on first use
_following_size = 0
_following_lock = threading.Lock()


def _follow_slots() -> threading.BoundedSemaphore:
    global _following, _following_size
    with _following_lock:
        if _following_size != settings.LOGS_FOLLOW_MAX_STREAMS:
            _following = threading.BoundedSemaphore(settings.LOGS_FOLLOW_MAX_STREAMS)
            _following_size = settings.LOGS_FOLLOW_MAX_STREAMS
        return _following


class LogStream:
    """The lines of an open log, each with its newline, as a streaming response sends them; `close()` (which
    the response calls when it is done or the client went away) stops the reads on the cluster and gives the
    follow slot back. An error while streaming ends the stream with one line saying why."""

    def __init__(self, lines: Iterator[str], release=None):
        self._lines = lines
        self._release = release

    def __iter__(self) -> Iterator[str]:
        try:
            for line in self._lines:
                yield line + "\n"
        except Exception as exc:  # the answer has begun: its status is sent, so the reason goes in the text
            log.warning("log stream broke off: %s", exc, exc_info=not isinstance(exc, BackendError))
            reason = str(exc) if isinstance(exc, BackendError) else type(exc).__name__
            yield BROKEN_PREFIX + _("the log stream broke off: %(reason)s") % {"reason": reason} + "\n"
        finally:
            self.close()

    def close(self) -> None:
        close = getattr(self._lines, "close", None)
        if close is not None:
            close()
        if self._release is not None:
            release, self._release = self._release, None
            release()


def open_log_stream(workload: Workload, *, tail: int = TAIL_DEFAULT, follow: bool = False, worker=None) -> LogStream:
    """The workload's log from its cluster (see the module docstring), or the ServiceError that says why not."""
    count = worker_count(workload)
    if worker is not None and worker >= count:
        raise InvalidInput(
            _("No such worker."),
            {"worker": _("%(name)s has workers 0 to %(last)s.") % {"name": workload.name, "last": count - 1}},
        )
    if not streams_logs(workload):
        found = _elsewhere(workload)
        raise LogsNotStreamable(
            _("Cluster %(cluster)s is set not to stream logs (connection.stream_logs is false).")
            % {"cluster": workload.cluster.name}
            + _where_else(found),
            data=found,
        )
    if not workload.backend_name:
        if workload.is_finished:
            raise Conflict(
                _("%(name)s never reached its cluster: it has no log.") % {"name": workload.name}, code="logs_gone"
            )
        raise Conflict(
            _("%(name)s has not reached its cluster yet: nothing is logged.") % {"name": workload.name},
            code="logs_not_ready",
            retry_after=RETRY_NOT_READY_S,
        )
    follow = follow and not workload.is_finished  # a finished workload writes no more
    if follow and worker is None and count > settings.LOGS_FOLLOW_MAX_WORKERS:
        raise InvalidInput(
            _("Too many workers to follow at once."),
            {
                "worker": _(
                    "Following all %(count)s workers at once is limited to %(limit)s: pick one (0 to %(last)s)."
                )
                % {"count": count, "limit": settings.LOGS_FOLLOW_MAX_WORKERS, "last": count - 1}
            },
        )
    release = None
    if follow:
        slots = _follow_slots()
        if not slots.acquire(blocking=False):
            raise TooManyLogStreams(
                _("This server follows %(limit)s logs already: try again later, or read the log without follow.")
                % {"limit": settings.LOGS_FOLLOW_MAX_STREAMS}
            )
        release = slots.release
    try:
        lines = get_backend(workload.cluster).stream_logs(
            log_source(workload),
            tail=tail,
            follow=follow,
            worker=worker,
            until=time.monotonic() + settings.LOGS_FOLLOW_MAX_S if follow else None,
        )
    except BackendError as exc:
        if release is not None:
            release()
        raise _refusal(workload, exc) from exc
    return LogStream(lines, release)


def _refusal(workload: Workload, exc: BackendError) -> ServiceError:
    """The API's answer for a backend's refusal to stream."""
    message = str(exc)
    if isinstance(exc, LogWorkerError):
        return InvalidInput(_("No such worker."), {"worker": message})
    if isinstance(exc, LogsUnavailable):
        found = _elsewhere(workload)
        return LogsNotStreamable(message + _where_else(found), data=found)
    if isinstance(exc, LogsNotReady):
        if workload.is_finished:
            found = _elsewhere(workload)
            return Conflict(
                _("%(name)s has ended and its cluster keeps no log of it: %(reason)s")
                % {"name": workload.name, "reason": message}
                + _where_else(found),
                code="logs_gone",
                data=found,
            )
        return Conflict(message, code="logs_not_ready", retry_after=RETRY_NOT_READY_S)
    if isinstance(exc, RetryableBackendError) or exc.retryable:
        return LogsBackendUnavailable(message)
    return LogsBackendFailed(message)
