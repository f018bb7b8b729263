"""Where a service's engine metrics are, and reading them: over HTTP, or in process for simulated clusters.

The URL comes from the cluster's `connection`:
* `inference_metrics_url`: a template (checked when the cluster is saved) with {name} (the backend name),
  {service} (the Kubernetes Service the renderer creates, "<name>-api"), {namespace}, {port} and {cluster},
  URL-quoted; `{{`/`}}` are literal braces. Point it at anything that answers the engines' exposition text,
  e.g. a Prometheus federation, which also carries each pod's `pod` label (then the page counts replicas):
  `http://prometheus-operated.monitoring.svc:9090/federate?match[]={{namespace="{namespace}"}}`.
* otherwise, where the cluster's backend says (`Backend.service_metrics_url`): on Kubernetes the service's own
  port (one replica answers each scrape); on a simulated cluster the simulator's
  /simulator/<cluster>/services/<name>/metrics, read in process (`Backend.service_metrics`);
* Slurm clusters without a pattern have no known endpoint: the telemetry says so.

No database writes and no transaction here. Every outcome is text or a FetchError; a timeout is short, so a
hung endpoint costs one scrape slot, never the cycle.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings

from apps.core.outbound import OutboundRefused, urlopen

MAX_BODY = 8 * 1024 * 1024  # a federation of a big service's pods; one engine answers ~50 kB
HTTP_THREADS = 16
HTTP, IN_PROCESS, NONE = "http", "in-process", "none"


@dataclass(frozen=True)
class Source:
    kind: str  # http | in-process | none
    url: str


class FetchError(Exception):
    """The endpoint did not answer usefully (unreachable, timeout, HTTP error, too large)."""


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format(**{key: urllib.parse.quote(value, safe="") for key, value in values.items()})


def source_for(workload, namespace: str) -> Source:
    """The metrics source of an inference workload running in `namespace` (Kubernetes) on its cluster."""
    from apps.backends.registry import get_backend
    from apps.backends.render.workload.common import short_name

    cluster = workload.cluster
    from apps.fleet.links import METRICS_URL_PLACEHOLDERS, url_template_error

    pattern = (cluster.connection or {}).get("inference_metrics_url")
    values = {
        "name": workload.backend_name,
        "service": f"{short_name(workload.backend_name)}-api",
        "namespace": namespace,
        "port": str((workload.spec or {}).get("port", 8000)),
        "cluster": cluster.name,
    }
    if pattern and not url_template_error(pattern, METRICS_URL_PLACEHOLDERS):
        return Source(HTTP, _fill(pattern, values))
    backend = get_backend(cluster)
    url = backend.service_metrics_url(workload.backend_name, values)
    if not url:
        return Source(NONE, "")
    return Source(IN_PROCESS if backend.telemetry_in_process else HTTP, url)


def _get(url: str, timeout: float) -> str:
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})  # noqa: S310 - http(s) from admin config
    try:
        with urlopen(request, timeout=timeout) as response:
            body = response.read(MAX_BODY + 1)
    except OutboundRefused as exc:
        raise FetchError(f"refused: {exc}") from exc
    except urllib.error.HTTPError as exc:
        raise FetchError(f"HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        reason = exc.reason
        raise FetchError("timed out" if isinstance(reason, TimeoutError) else f"unreachable: {reason}") from exc
    except TimeoutError as exc:
        raise FetchError("timed out") from exc
    except OSError as exc:
        raise FetchError(f"{type(exc).__name__}: {exc}") from exc
    if len(body) > MAX_BODY:
        raise FetchError(f"answer larger than {MAX_BODY} bytes")
    return body.decode("utf-8", errors="replace")


def fetch_http(urls: dict[int, str]) -> dict[int, str | FetchError]:
    """GET every URL in parallel threads (I/O bound): {key: text or FetchError}."""
    timeout = settings.INFERENCE_SCRAPE_TIMEOUT_S

    def one(item: tuple[int, str]) -> tuple[int, str | FetchError]:
        key, url = item
        try:
            return key, _get(url, timeout)
        except FetchError as exc:
            return key, exc

    if not urls:
        return {}
    with ThreadPoolExecutor(max_workers=min(HTTP_THREADS, len(urls))) as pool:
        return dict(pool.map(one, urls.items()))


def fetch_in_process(cluster, name: str) -> str | FetchError:
    """The answer of a service on a cluster whose backend has its own telemetry (the simulator), without HTTP (the
    same code its /simulator/ URL runs)."""
    from apps.backends.registry import get_backend

    answer = get_backend(cluster).service_metrics(name)
    if answer.status != 200:
        return FetchError(f"HTTP {answer.status}: {answer.body.strip()}")
    return answer.body
