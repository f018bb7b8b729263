"""Nodes and pods kept current from watch events between inventory syncs, with no long-lived thread.

From the Kubernetes API concepts page (https://kubernetes.io/docs/reference/using-api/api-concepts/,
#efficient-detection-of-changes and #watch-bookmarks):

* a list answers with the collection's `metadata.resourceVersion`; a watch from it
  (`?watch=1&resourceVersion=…`) streams every change after it as JSON lines `{"type", "object"}` with types
  ADDED, MODIFIED, DELETED (and BOOKMARK when asked with `allowWatchBookmarks=true`: only the object's
  `metadata.resourceVersion`, saying every change up to it was sent);
* the server keeps a few minutes of history: a watch from an older resourceVersion gets 410 Gone (an ERROR event
  whose Status has code 410, or the HTTP status), and the client must list again and watch from the new list;
* `timeoutSeconds` bounds the watch on the server's side.

How the console uses it (`KubernetesBackend.inventory_since`): the first sync lists nodes and pods as before and
keeps the two lists' resourceVersions in the cluster's `inventory_cursor` (stored by the fleet service in the same
transaction as the inventory it describes, so a failed write never skips events). Each later sync opens both
watches from those resourceVersions and reads what has arrived until the stream is quiet for `watch_idle_s`
(default 0.1 s), then closes them: it reads only the events since the last sync. The nodes those events touch
(a node's own event, or a pod placed on it) are recomputed from the node object and that node's pods (one list
with `spec.nodeName=`), and only they are returned; the cursor moves to the last event or bookmark read. An event
read but not applied (the sync failed) is read again next time, and recomputing a node twice gives the same row.
A 410, a cursor from another api_url, or one older than `inventory_relist_s` (default 3600: a periodic full list,
as informers resync) makes the sync list everything again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import urllib3
from kubernetes.client.exceptions import ApiException

from apps.backends.base import RetryableBackendError
from apps.backends.kubernetes.api import KubeApi, translate
from apps.core.outbound import OutboundRefused

DEFAULT_IDLE_S = 0.1
DEFAULT_MAX_S = 10
RESUMES = 3


class Expired(Exception):
    """410 Gone: the resourceVersion is older than the server's history; list again."""


@dataclass
class Drained:
    """What one watch read: its change events in order and the resourceVersion to watch from next time."""

    events: list[dict] = field(default_factory=list)
    resource_version: str = ""
    bookmarks: int = 0
    resumed: int = 0


def drain(
    api: KubeApi,
    path: str,
    what: str,
    resource_version: str,
    *,
    idle_s: float = DEFAULT_IDLE_S,
    max_s: int = DEFAULT_MAX_S,
    **selectors: str,
) -> Drained:
    """The events after `resource_version` that arrive before the stream is quiet for `idle_s` (at most `max_s`).

    A connection that breaks in the middle is opened again from the last resourceVersion read (a few times);
    Expired on 410."""
    out = Drained(resource_version=resource_version)
    deadline = time.monotonic() + max_s
    while True:
        response = _open(api, path, what, out.resource_version, max_s, selectors)
        try:
            # The answer's headers came within the request timeout; from here on, quiet for idle_s means done.
            sock = getattr(response.connection, "sock", None)
            if sock is not None:
                sock.settimeout(idle_s)
            _read(response, out, deadline)
            return out
        except (urllib3.exceptions.ProtocolError, ConnectionError) as exc:
            if out.resumed >= RESUMES or time.monotonic() >= deadline:
                raise RetryableBackendError(
                    f"cluster {api.cluster_name}: {what}: the watch connection broke {RESUMES + 1} times ({exc})"
                ) from exc
            out.resumed += 1
        finally:
            response.close()


def _open(api: KubeApi, path, what, resource_version, max_s, selectors):
    query = {
        "watch": "1",
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(max_s),
        **selectors,
    }
    try:
        return api.client.call_api(
            path,
            "GET",
            query_params=[(k, v) for k, v in query.items() if v not in (None, "")],
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=(float(api.timeout), float(api.timeout)),
        )
    except ApiException as exc:
        if exc.status == 410:
            raise Expired(str(exc.reason)) from exc
        raise translate(exc, what, api.cluster_name) from exc
    except (urllib3.exceptions.HTTPError, OSError, OutboundRefused) as exc:
        raise translate(exc, what, api.cluster_name) from exc


def _read(response, out: Drained, deadline: float) -> None:
    buffer = b""
    try:
        chunks = response.read_chunked() if response.chunked else iter(lambda: response.read(65536), b"")
        for chunk in chunks:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    _event(json.loads(line), out)
            if time.monotonic() >= deadline:
                return
    except urllib3.exceptions.ReadTimeoutError:
        return  # quiet for idle_s: everything since the last sync has been read
    except urllib3.exceptions.ProtocolError as exc:
        # A read timeout inside the chunk reader surfaces wrapped; anything else is a broken connection.
        if "timed out" in str(exc).lower():
            return
        raise


def _event(event: dict, out: Drained) -> None:
    kind, obj = event.get("type"), event.get("object") or {}
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise Expired(obj.get("message", "410 Gone"))
        raise RetryableBackendError(f"the watch ended with an error: {obj.get('message') or obj}")
    version = (obj.get("metadata") or {}).get("resourceVersion") or out.resource_version
    if kind == "BOOKMARK":
        out.bookmarks += 1
    elif kind in ("ADDED", "MODIFIED", "DELETED"):
        out.events.append(event)
    out.resource_version = version
