"""The fake API's object store: resourceVersions, selectors, paging, create / patch / delete semantics."""

from __future__ import annotations

import bisect
import copy
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from tests.backends.k8s_fake import patching
from tests.backends.k8s_fake.resources import Resource

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped


class ApiError(Exception):
    """An error answer: HTTP code, Status reason, message and optional details."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> dict:
        out = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            out["details"] = self.details
        return out


def timestamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


# --- selectors --------------------------------------------------------------------------------------------

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def label_matcher(selector: str) -> Callable[[dict], bool]:
    tests = []
    for term in _split(selector or ""):
        term = term.strip()
        match = _SET.match(term)
        if match:
            key, op, values = match.group(1), match.group(2), {v.strip() for v in match.group(3).split(",")}
            if op == "in":
                tests.append(lambda labels, k=key, v=values: labels.get(k) in v)
            else:
                tests.append(lambda labels, k=key, v=values: labels.get(k) not in v)
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif term.startswith("!"):
            tests.append(lambda labels, k=term[1:].strip(): k not in labels)
        else:
            tests.append(lambda labels, k=term: k in labels)
    return lambda obj: all(test((obj.get("metadata") or {}).get("labels") or {}) for test in tests)


FIELDS = {
    "metadata.name": lambda o: o["metadata"].get("name", ""),
    "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
    "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName", ""),
    "status.phase": lambda o: (o.get("status") or {}).get("phase", ""),
    "involvedObject.name": lambda o: (o.get("involvedObject") or {}).get("name", ""),
    "involvedObject.kind": lambda o: (o.get("involvedObject") or {}).get("kind", ""),
    "type": lambda o: o.get("type", ""),
}


def _node_term(selector: str) -> str | None:
    """The node of a `spec.nodeName=<node>` term in a field selector, if it has one."""
    for term in _split(selector or ""):
        if "!=" not in term and term.replace("==", "=").split("=", 1)[0].strip() == "spec.nodeName":
            return term.replace("==", "=").split("=", 1)[1].strip()
    return None


def field_matcher(selector: str) -> Callable[[dict], bool]:
    tests = []
    for term in _split(selector or ""):
        negate = "!=" in term
        key, value = (s.strip() for s in (term.split("!=", 1) if negate else term.replace("==", "=").split("=", 1)))
        if key not in FIELDS:
            raise ApiError(400, "BadRequest", f'field label not supported: "{key}"')
        getter = FIELDS[key]
        tests.append(lambda o, g=getter, v=value, n=negate: (g(o) != v) if n else (g(o) == v))
    return lambda obj: all(test(obj) for test in tests)


# --- the store --------------------------------------------------------------------------------------------


class Store:
    """Objects by resource, with a global resourceVersion counter. Callers hold the server's lock."""

    def __init__(self, clock: Callable[[], datetime]):
        self.clock = clock
        self.objects: dict[tuple[str, str], dict[Key, dict]] = {}
        self.applied: dict[tuple, dict[str, dict]] = {}  # object -> manager -> last applied config
        self._sorted: dict[tuple[str, str], list[Key]] = {}
        self.rv = 1000
        # The change history watches are served from (watch.py): (resourceVersion, resource id, type, object as it
        # was then, the object before). Compaction drops the oldest, as etcd's does
        # (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).
        self.history: list[tuple[int, tuple[str, str], str, dict, dict | None]] = []
        self.compacted = self.rv  # a watch from a resourceVersion older than this is answered 410 Gone
        self.history_limit = 200_000
        self._recorded: dict[tuple[str, str, str, str], dict] = {}
        self._node_index: dict[tuple[str, str], dict[str, list[Key]]] = {}
        self.changed: Callable[[], None] = lambda: None  # the server wakes its watches

    def record(self, resource: Resource, kind: str, obj: dict, old: dict | None) -> None:
        self._node_index.pop((resource.group, resource.plural), None)
        snapshot = copy.deepcopy(obj)
        meta = snapshot["metadata"]
        ident = (
            resource.group,
            resource.plural,
            meta.get("namespace", "") if resource.namespaced else "",
            meta["name"],
        )
        if kind == "DELETED":
            self._recorded.pop(ident, None)
        else:
            self._recorded[ident] = snapshot
        self.history.append((self.rv, (resource.group, resource.plural), kind, snapshot, old))
        if len(self.history) > self.history_limit:
            self.compact(self.history[len(self.history) - self.history_limit][0] - 1)
        self.changed()

    def compact(self, upto: int | None = None) -> None:
        """Forget the changes up to resourceVersion `upto` (default: all of them)."""
        upto = self.rv if upto is None else upto
        self.history = [event for event in self.history if event[0] > upto]
        self.compacted = max(self.compacted, upto)

    def bucket(self, resource: Resource) -> dict[Key, dict]:
        return self.objects.setdefault((resource.group, resource.plural), {})

    def _keys(self, resource: Resource) -> list[Key]:
        rid = (resource.group, resource.plural)
        if rid not in self._sorted:
            self._sorted[rid] = sorted(self.bucket(resource))
        return self._sorted[rid]

    def _touch(self, resource: Resource) -> None:
        self._sorted.pop((resource.group, resource.plural), None)

    def _on_node(self, resource: Resource, keys: list[Key]) -> dict[str, list[Key]]:
        """Keys by spec.nodeName: the API server's watch cache indexes pods by node (the kubelet lists its pods
        with `fieldSelector=spec.nodeName=<node>`), so such a list costs the node's pods, not the cluster's."""
        rid = (resource.group, resource.plural)
        if rid not in self._node_index:
            bucket = self.bucket(resource)
            index: dict[str, list[Key]] = {}
            for key in keys:
                index.setdefault((bucket[key].get("spec") or {}).get("nodeName", ""), []).append(key)
            self._node_index[rid] = index
        return self._node_index[rid]

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    # reads

    def get(self, resource: Resource, ns: str, name: str) -> dict:
        obj = self.bucket(resource).get((ns, name))
        if obj is None:
            raise not_found(resource, name)
        return obj

    def list(
        self,
        resource: Resource,
        ns: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        token: str = "",
    ) -> tuple[list[dict], str]:
        """Matching objects in key order, at most `limit`, and the continue token of the next page."""
        labels, fields = label_matcher(label_selector), field_matcher(field_selector)
        keys = self._keys(resource)
        node = _node_term(field_selector)
        if node is not None:
            keys = self._on_node(resource, keys).get(node, [])
        start = 0
        if token:
            try:
                after = tuple(token.split("/", 1))
            except ValueError as exc:  # pragma: no cover - tokens come from us
                raise ApiError(410, "Expired", "continue token is invalid") from exc
            start = bisect.bisect_right(keys, after)
        bucket = self.bucket(resource)
        items: list[dict] = []
        for index in range(start, len(keys)):
            key = keys[index]
            if ns and key[0] != ns:
                continue
            obj = bucket[key]
            if labels(obj) and fields(obj):
                items.append(obj)
                if limit and len(items) == limit:
                    # Like etcd-backed paging: a token whenever keys remain, even if none of them match.
                    return items, f"{key[0]}/{key[1]}" if index + 1 < len(keys) else ""
        return items, ""

    # writes

    def create(self, resource: Resource, ns: str, obj: dict, *, dry_run: bool = False) -> dict:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            else:
                raise ApiError(422, "Invalid", f"{resource.kind} is invalid: metadata.name: Required value")
        if resource.namespaced:
            meta["namespace"] = ns
            if resource.kind != "Namespace" and not self.namespace_exists(ns):
                raise ApiError(
                    404,
                    "NotFound",
                    f'namespaces "{ns}" not found',
                    {"name": ns, "kind": "namespaces"},
                )
        else:
            meta.pop("namespace", None)
        key = (ns if resource.namespaced else "", meta["name"])
        if key in self.bucket(resource):
            raise ApiError(
                409,
                "AlreadyExists",
                f'{resource.plural}{"." + resource.group if resource.group else ""} "{meta["name"]}" already exists',
                {"name": meta["name"], "group": resource.group, "kind": resource.plural},
            )
        obj["apiVersion"] = resource.group_version
        obj["kind"] = resource.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = timestamp(self.clock())
        meta["generation"] = 1
        if dry_run:
            return obj
        meta["resourceVersion"] = self.next_rv()
        self.bucket(resource)[key] = obj
        self._touch(resource)
        self.record(resource, "ADDED", obj, None)
        return obj

    def put(self, resource: Resource, obj: dict) -> dict:
        """Store a changed object (the caller checked preconditions); bumps resourceVersion and generation."""
        meta = obj["metadata"]
        key = (meta.get("namespace", "") if resource.namespaced else "", meta["name"])
        old = self.bucket(resource).get(key)
        if old is not None and old.get("spec") != obj.get("spec"):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        meta["resourceVersion"] = self.next_rv()
        if key not in self.bucket(resource):
            self._touch(resource)
        self.bucket(resource)[key] = obj
        before = self._last_version(resource, key)
        self.record(resource, "MODIFIED" if old is not None else "ADDED", obj, before)
        return obj

    def _last_version(self, resource: Resource, key: Key) -> dict | None:
        """The object as its last recorded change left it (what a watch's selector matched before this change):
        objects are changed in place before `put`, so the live one cannot tell."""
        return self._recorded.get((resource.group, resource.plural, *key))

    def remove(self, resource: Resource, ns: str, name: str) -> dict | None:
        obj = self.bucket(resource).pop((ns, name), None)
        if obj is not None:
            self._touch(resource)
            self.applied.pop((resource.group, resource.plural, ns, name), None)
            # The DELETED event carries the object at the resourceVersion of its deletion.
            before = self._last_version(resource, (ns, name))
            obj["metadata"]["resourceVersion"] = self.next_rv()
            self.record(resource, "DELETED", obj, before)
        return obj

    def namespace_exists(self, ns: str) -> bool:
        return ("", ns) in self.objects.get(("", "namespaces"), {})

    def all(self, group: str, plural: str) -> list[dict]:
        return list(self.objects.get((group, plural), {}).values())


def not_found(resource: Resource, name: str) -> ApiError:
    kind = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
    return ApiError(
        404, "NotFound", f'{kind} "{name}" not found', {"name": name, "group": resource.group, "kind": resource.plural}
    )


def patched(live: dict, body: object, content_type: str, resource: Resource) -> dict:
    """`live` after a non-apply patch, or ApiError (400 unsupported type, 409 stale resourceVersion, 422)."""
    try:
        if content_type == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
            new = patching.json_patch(live, body)
        elif content_type == "application/merge-patch+json":
            new = patching.merge_patch(live, body)
        elif content_type == "application/strategic-merge-patch+json":
            if resource.addon:
                raise ApiError(
                    415, "UnsupportedMediaType", "strategic merge patch is not supported for custom resources"
                )
            new = patching.strategic_merge_patch(live, body)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"the media type {content_type!r} is not supported")
    except patching.PatchError as exc:
        raise ApiError(422, "Invalid", str(exc)) from exc
    wanted = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
    if wanted and wanted != live["metadata"]["resourceVersion"]:
        raise conflict(resource, live["metadata"]["name"])
    for field in ("uid", "creationTimestamp", "name", "namespace"):
        if live["metadata"].get(field) != new.get("metadata", {}).get(field):
            raise ApiError(422, "Invalid", f"metadata.{field}: field is immutable")
    new["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
    return new


def conflict(resource: Resource, name: str) -> ApiError:
    kind = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {kind} "{name}": the object has been modified; please apply your '
        "changes to the latest version and try again",
        {"name": name, "group": resource.group, "kind": resource.plural},
    )
