"""Reading a cluster's DCGM telemetry: exporter endpoints over HTTP, a Prometheus server, or in process from a
backend with its own telemetry (the simulator).

No database writes here and no transaction is held: the result is handed to ingestion. Each node's
outcome is either a ParsedScrape or a ScrapeError (unreachable, timeout, HTTP error), so one dead
exporter never costs the rest of the cycle.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from apps.core.outbound import OutboundRefused, urlopen
from apps.health.parsing import ParsedScrape, parse_exporter, parse_prometheus

MAX_BODY = 64 * 1024 * 1024  # one node's exporter text is ~55 kB; a Prometheus answer for a big fleet is larger
HTTP_THREADS = 32


@dataclass(frozen=True)
class ScrapeError:
    message: str


Outcome = ParsedScrape | ScrapeError


def _get(url: str, timeout: float) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "text/plain, application/json"})  # noqa: S310
    with urlopen(request, timeout=timeout) as response:
        body = response.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise ValueError(f"answer larger than {MAX_BODY} bytes")
    return body


def _describe(exc: Exception) -> str:
    if isinstance(exc, OutboundRefused):
        return f"refused: {exc}"
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"unreachable: {exc.reason}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"


def exporter_url(pattern: str, cluster: str, node: str) -> str:
    return pattern.replace("{node}", urllib.parse.quote(node, safe="")).replace(
        "{cluster}", urllib.parse.quote(cluster, safe="")
    )


def scrape_exporters(pattern: str, cluster: str, nodes: list[str], wanted, timeout: float) -> dict[str, Outcome]:
    """GET every node's exporter in parallel threads (I/O bound) and parse each answer."""

    def one(node: str) -> tuple[str, Outcome]:
        try:
            body = _get(exporter_url(pattern, cluster, node), timeout)
        except Exception as exc:  # every failure of one exporter is that node's outcome, never the cycle's
            return node, ScrapeError(_describe(exc))
        return node, parse_exporter(body.decode("utf-8", errors="replace"), wanted)

    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=min(HTTP_THREADS, len(nodes))) as pool:
        return dict(pool.map(one, nodes))


def query_prometheus(base_url: str, nodes: list[str], wanted, timeout: float) -> dict[str, Outcome]:
    """One instant query for the DCGM series; nodes without series are reported as not answering."""
    metric_names = "|".join(sorted(wanted)) if wanted else "DCGM_.*"
    query = urllib.parse.urlencode({"query": f'{{__name__=~"{metric_names}"}}'})
    try:
        body = json.loads(_get(f"{base_url.rstrip('/')}/api/v1/query?{query}", timeout))
        if body.get("status") != "success" or body.get("data", {}).get("resultType") != "vector":
            raise ValueError(f"unexpected answer: status {body.get('status')!r}, error {body.get('error')!r}")
        hosts = parse_prometheus(body["data"]["result"], wanted)
    except Exception as exc:
        error = ScrapeError(f"Prometheus query failed: {_describe(exc)}")
        return dict.fromkeys(nodes, error)
    missing = ScrapeError("no DCGM series for this node in Prometheus")
    return {node: hosts.get(node, missing) for node in nodes}


def read_in_process(cluster, nodes: list[str], wanted) -> dict[str, Outcome]:
    """The exporter text of every node of a cluster whose backend has its own telemetry (a simulated one), as its
    HTTP endpoints would answer, read in process (the simulator renders it from one load of the simulation);
    parsed after the backend's lock is released."""
    from apps.backends.registry import get_backend

    out: dict[str, Outcome] = {}
    for node, answer in get_backend(cluster).node_metrics(nodes).items():
        if answer.status == 200:
            out[node] = parse_exporter(answer.body, wanted)
        else:
            out[node] = ScrapeError(f"exporter answered {answer.status}: {answer.body.strip()}")
    return out
