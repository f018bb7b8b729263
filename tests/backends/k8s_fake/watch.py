"""Watch: a collection GET with `?watch=1` streams the changes after a resourceVersion, as the API server does.

Written from the Kubernetes API concepts page
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes, #watch-bookmarks,
#resource-versions):

* every object carries `metadata.resourceVersion`, and a list carries the collection's in `metadata`; a watch from
  that resourceVersion sends each change after it, in order, as one JSON object per line of a chunked 200 answer:
  `{"type": "ADDED" | "MODIFIED" | "DELETED", "object": {...}}` (a DELETED event carries the object at the
  resourceVersion of its deletion);
* without a resourceVersion (or with "0") the watch first sends the objects there are as synthetic ADDED events
  ("Get State and Start at Most Recent" / "Start at Any"), then the changes;
* the server keeps a limited history (etcd 3: about five minutes): a watch from a resourceVersion older than that
  is answered, inside the 200 stream, with an ERROR event whose object is a Status with code 410 (reason Expired,
  "too old resource version"): the client must list again and watch from the list's resourceVersion;
* `allowWatchBookmarks=true`: the server may send BOOKMARK events whose object has only `kind`, `apiVersion` and
  `metadata.resourceVersion`, meaning every change up to that resourceVersion has been sent (here: whenever the
  watch has caught up and the store's resourceVersion moved on since the last event it sent, e.g. through changes
  to other resources or objects the selectors exclude); clients must not count on them;
* `timeoutSeconds`: the server ends the watch (the stream closes normally) after that many seconds;
* with label or field selectors, an object that starts matching arrives as ADDED and one that stops matching as
  DELETED (the watch cache's filtering, as `kubectl get --watch -l` shows).
"""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Iterator

from tests.backends.k8s_fake.resources import Resource
from tests.backends.k8s_fake.store import ApiError, field_matcher, label_matcher

DEFAULT_TIMEOUT_S = 1800.0  # kube-apiserver's --min-request-timeout: watches last 30 to 60 minutes


class Dropped(Exception):
    """An injected fault: the connection breaks in the middle of the stream."""


def _line(kind: str, obj: dict) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def expired(requested: int, oldest: int) -> bytes:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {requested} ({oldest})",
        "reason": "Expired",
        "code": 410,
    }
    return _line("ERROR", status)


def start(fake, resource: Resource, ns: str, query: dict[str, str]) -> Iterator[bytes]:
    """The watch's stream (the caller holds fake.lock): ApiError for a bad request, else the lines to send."""
    labels = label_matcher(query.get("labelSelector", ""))
    fields = field_matcher(query.get("fieldSelector", ""))

    def match(obj: dict | None) -> bool:
        if obj is None:
            return False
        return (not ns or obj["metadata"].get("namespace") == ns) and labels(obj) and fields(obj)

    try:
        timeout = float(query.get("timeoutSeconds") or DEFAULT_TIMEOUT_S)
    except ValueError as exc:
        raise ApiError(400, "BadRequest", f"invalid timeoutSeconds {query['timeoutSeconds']!r}") from exc
    raw = query.get("resourceVersion", "")
    store = fake.store
    initial: list[bytes] = []
    if raw in ("", "0"):
        items, _ = store.list(
            resource, ns, label_selector=query.get("labelSelector", ""), field_selector=query.get("fieldSelector", "")
        )
        initial = [_line("ADDED", obj) for obj in items]
        since = store.rv
    else:
        try:
            since = int(raw)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"resourceVersion: Invalid value: {raw!r}") from exc
        if since < store.compacted:
            return iter([expired(since, store.compacted + 1)])
    bookmarks = query.get("allowWatchBookmarks") == "true"
    return _stream(fake, resource, match, since, initial, time.monotonic() + timeout, bookmarks)


def _stream(fake, resource: Resource, match, since: int, initial: list[bytes], deadline: float, bookmarks: bool):
    rid = (resource.group, resource.plural)
    store = fake.store
    yield from initial
    sent = 0
    cursor = since  # every change up to here has been considered
    bookmarked = since
    while not fake._stopping.is_set():
        lines: list[bytes] = []
        with fake.watch_changed:
            start_at = bisect.bisect_right(store.history, cursor, key=lambda event: event[0])
            pending = store.history[start_at:]
            if not pending:
                if bookmarks and store.rv > bookmarked:
                    bookmarked = cursor = store.rv
                    lines.append(_bookmark(resource, store.rv))
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    fake.watch_changed.wait(remaining)
                    continue
            for rv, where, kind, obj, old in pending:
                cursor = rv
                if where != rid:
                    continue
                event = _event(kind, obj, old, match)
                if event is not None:
                    lines.append(_line(event, obj))
                    bookmarked = rv
        for line in lines:
            if fake.drop_watch_after is not None and sent >= fake.drop_watch_after:
                fake.drop_watch_after = None
                raise Dropped()
            sent += 1
            yield line
        if time.monotonic() >= deadline:
            return


def _bookmark(resource: Resource, rv: int) -> bytes:
    return _line(
        "BOOKMARK",
        {"kind": resource.kind, "apiVersion": resource.group_version, "metadata": {"resourceVersion": str(rv)}},
    )


def _event(kind: str, obj: dict, old: dict | None, match) -> str | None:
    """The event a watch with selectors sends for a change, or None (it concerns no object the watch sees)."""
    was = match(old)
    if kind == "DELETED":
        return "DELETED" if was or (old is None and match(obj)) else None
    now = match(obj)
    if now:
        return "MODIFIED" if was else "ADDED"
    return "DELETED" if was else None
