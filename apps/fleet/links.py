"""Link templates a cluster's settings may carry, e.g. `connection.logs_url` for its log system."""

from __future__ import annotations

import string

# Placeholders a `logs_url` template may use; the workloads app fills them in, URL-quoted.
LOGS_URL_PLACEHOLDERS = ("name", "namespace", "workload_id", "tenant", "queue", "cluster")


def logs_url_error(template) -> str:
    """Why a `logs_url` template is unusable ('' when it is fine)."""
    if not isinstance(template, str) or not template.startswith(("https://", "http://")):
        return "Must be an http:// or https:// URL template, e.g. https://grafana.example/explore?q={name}."
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        return f"Not a valid template: {exc}."
    unknown = sorted(names - set(LOGS_URL_PLACEHOLDERS))
    if unknown:
        return f"Unknown placeholders {unknown}; available: {', '.join(LOGS_URL_PLACEHOLDERS)}."
    return ""
