"""Link templates a cluster's settings may carry: `connection.logs_url` for its log system, and
`connection.inference_metrics_url` for its inference services' engine metrics."""

from __future__ import annotations

import string
from urllib.parse import urlsplit

from apps.core.outbound import url_error

# Placeholders a `logs_url` template may use; the workloads app fills them in, URL-quoted.
LOGS_URL_PLACEHOLDERS = ("name", "namespace", "workload_id", "tenant", "queue", "cluster")
# Placeholders of `inference_metrics_url`; the inference app fills them in, URL-quoted.
METRICS_URL_PLACEHOLDERS = ("name", "service", "namespace", "port", "cluster")


def url_template_error(template, placeholders: tuple[str, ...] = LOGS_URL_PLACEHOLDERS) -> str:
    """Why a URL template (`logs_url`, or another with its own placeholders) is unusable ('' if fine)."""
    if not isinstance(template, str) or not template.startswith(("https://", "http://")):
        return "Must be an http:// or https:// URL template, e.g. https://grafana.example/explore?q={name}."
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        return f"Not a valid template: {exc}."
    unknown = sorted(names - set(placeholders))
    if unknown:
        return f"Unknown placeholders {unknown}; available: {', '.join(placeholders)}."
    return ""


def template_outbound_error(template: str) -> str:
    """Why the outbound policy refuses the URL a valid template fills in ('' if it does not, or cannot tell yet:
    a host with placeholders is checked on every call)."""
    names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    url = template.format(**dict.fromkeys(names, "x"))
    return url_error(url, resolve_names="{" not in urlsplit(template).netloc)
