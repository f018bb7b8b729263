"""Patch semantics of the fake API: JSON patch, JSON merge patch, a small strategic merge, server-side apply.

Strategic merge knows only the merge keys the backend's objects need (containers, env, volumes by name;
conditions by type); other lists are replaced, as JSON merge patch does. Server-side apply remembers each
manager's last applied configuration: fields a manager stops applying are removed, and applying a value
another manager applied differently is a conflict unless forced. Field ownership by non-apply updates is
not tracked.
"""

from __future__ import annotations

import copy

MERGE_KEYS = {"containers": "name", "initContainers": "name", "env": "name", "volumes": "name", "conditions": "type"}


class PatchError(ValueError):
    """A patch the server refuses (422 Unprocessable Entity)."""


def merge_patch(target: object, patch: object) -> object:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge_patch(target: object, patch: object, key: str = "") -> object:
    if isinstance(patch, list) and isinstance(target, list) and key in MERGE_KEYS:
        merge_key = MERGE_KEYS[key]
        out = copy.deepcopy(target)
        for item in patch:
            if not isinstance(item, dict) or merge_key not in item:
                raise PatchError(f"{key}: every item needs its merge key {merge_key!r}")
            index = next((i for i, old in enumerate(out) if old.get(merge_key) == item[merge_key]), None)
            if index is None:
                out.append(copy.deepcopy(item))
            else:
                out[index] = strategic_merge_patch(out[index], item)
        return out
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = strategic_merge_patch(out.get(name), value, name)
    return out


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def json_patch(target: dict, operations: list) -> dict:
    """RFC 6902: add, remove, replace and test (what clients send to nodes)."""
    doc = copy.deepcopy(target)
    for op in operations:
        parts = _pointer(op.get("path", ""))
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
        last = parts[-1]
        kind = op.get("op")
        try:
            if kind == "test":
                current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
                if current != op.get("value"):
                    raise PatchError(f"test failed at {op['path']}: {current!r} != {op.get('value')!r}")
            elif kind == "remove":
                if isinstance(parent, list):
                    parent.pop(int(last))
                else:
                    del parent[last]
            elif kind in ("add", "replace"):
                if isinstance(parent, list):
                    if last == "-":
                        parent.append(op["value"])
                    elif kind == "add":
                        parent.insert(int(last), op["value"])
                    else:
                        parent[int(last)] = op["value"]
                else:
                    if kind == "replace" and last not in parent:
                        raise PatchError(f"replace: no value at {op['path']}")
                    parent[last] = op["value"]
            else:
                raise PatchError(f"unsupported JSON patch op {kind!r}")
        except (KeyError, IndexError, ValueError) as exc:
            if isinstance(exc, PatchError):
                raise
            raise PatchError(f"{kind} at {op.get('path')}: {exc}") from exc
    return doc


def leaves(obj: object, prefix: tuple = ()) -> dict[tuple, object]:
    """Leaf paths of a configuration (lists count as one leaf: this fake replaces them whole; an empty
    object owns nothing)."""
    if isinstance(obj, dict):
        out: dict[tuple, object] = {}
        for key, value in obj.items():
            out.update(leaves(value, (*prefix, key)))
        return out
    return {prefix: obj} if prefix else {}


def _remove(doc: dict, path: tuple) -> None:
    node = doc
    for part in path[:-1]:
        node = node.get(part)
        if not isinstance(node, dict):
            return
    node.pop(path[-1], None)


IGNORED = {("metadata", "resourceVersion"), ("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")}


def apply(live: dict | None, config: dict, manager: str, applied: dict[str, dict], force: bool) -> dict:
    """Server-side apply of `config` by `manager` onto `live` (None: create). `applied` is updated in place."""
    mine = leaves(config)
    conflicts = []
    for other, other_config in applied.items():
        if other == manager:
            continue
        for path, value in leaves(other_config).items():
            if path in IGNORED:
                continue
            if path in mine and mine[path] != value:
                conflicts.append((other, "." + ".".join(map(str, path))))
    if conflicts and not force:
        listing = "; ".join(f'conflict with "{who}": {path}' for who, path in conflicts)
        raise ApplyConflict(f"Apply failed with {len(conflicts)} conflict{'s' * (len(conflicts) > 1)}: {listing}")
    doc = copy.deepcopy(live) if live is not None else {}
    previous = leaves(applied.get(manager, {}))
    owned_by_others = {p for o, c in applied.items() if o != manager for p in leaves(c)}
    for path in previous:
        if path not in mine and path not in owned_by_others and path not in IGNORED:
            _remove(doc, path)
    doc = merge_patch(doc, config)
    if force:  # forced values take the fields over from the other managers
        for other in list(applied):
            if other != manager:
                applied[other] = _without(applied[other], set(mine))
    applied[manager] = copy.deepcopy(config)
    return doc


def _without(config: dict, paths: set[tuple]) -> dict:
    out = copy.deepcopy(config)
    for path in paths:
        _remove(out, path)
    return out


class ApplyConflict(Exception):
    """Server-side apply conflict (409)."""
