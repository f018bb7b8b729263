"""Pushing the tenancy desired state: a dry-run diff first, then server-side apply; and a drift report.

The objects come from the quota renderers (`apps.backends.render.render_kubernetes`): PriorityClasses,
Kueue or Volcano objects, and per bound namespace the Namespace, its ResourceQuota and Kueue LocalQueue.

* `plan` asks the API server what applying each object would change (server-side apply with
  dryRun=All, compared with the live object): the "what will change on the cluster" preview.
* `push` applies, in dependency order, only what the plan says changes, then deletes the console's own
  objects of the PRUNED kinds that the desired state no longer holds.
* `drift` compares what the cluster holds under the console's label with the desired objects: missing,
  changed by someone else (the fields), and left over (the console no longer wants them; apart from the
  pruned kinds never deleted automatically, since a ClusterQueue may still hold workloads); and names what the
  cluster's controllers would not act on (semantic.py): a LocalQueue missing for the console's workloads, a
  ResourceFlavor or a Volcano pool queue that no node matches.

Pruned: Kueue LocalQueues and the pre-pull DaemonSets only. A LocalQueue holds no quota and no usage of its own;
it only lets the workloads of its namespace name a ClusterQueue (https://kueue.sigs.k8s.io/docs/concepts/local_queue/).
One the console no longer renders is either a name it used before (LocalQueues were once named after the queue
alone, a name no workload carries) or one in a namespace no longer bound to the queue: both are a way into
a ClusterQueue the desired state does not have. The new LocalQueue is applied before the old one goes. And the
console's image pre-pull DaemonSets: they hold nothing but images already on the nodes, and one the console no
longer renders belongs to a pool whose pre-pull list was emptied.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field

from kubernetes.utils import parse_quantity

from apps.backends.base import NotFoundError
from apps.backends.kubernetes import semantic
from apps.backends.kubernetes.api import KubeApi
from apps.backends.kubernetes.resources import QUOTA_KINDS, Kind, kind_of, object_path
from apps.backends.render.objects import MANAGED_BY, MANAGER

SERVER_FIELDS = {"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink"}
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def label(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {ns}{meta.get('name')}"


def key(obj: dict) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("namespace", ""), meta.get("name", ""))


def normalized(obj: dict) -> dict:
    """The object without status and the fields the server maintains."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata") or {}
    for name in SERVER_FIELDS:
        meta.pop(name, None)
    (meta.get("annotations") or {}).pop(LAST_APPLIED, None)
    if meta.get("annotations") == {}:
        meta.pop("annotations")
    return out


def _same(a: object, b: object) -> bool:
    if a == b:
        return True
    if isinstance(a, int | str) and isinstance(b, int | str) and not isinstance(a, bool) and not isinstance(b, bool):
        try:
            return parse_quantity(a) == parse_quantity(b)  # "8" and 8, "1000m" and "1"
        except ValueError:
            return False
    return False


def changed_paths(before: object, after: object, prefix: str = "") -> list[str]:
    """Leaf paths where `after` differs from `before` (lists compare whole)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for name in sorted(set(before) | set(after), key=str):
            out += changed_paths(before.get(name), after.get(name), f"{prefix}.{name}")
        return out
    return [] if _same(before, after) else [prefix or "."]


def desired_paths_differing(desired: object, live: object, prefix: str = "") -> list[str]:
    """Paths of `desired`'s leaves that `live` does not hold (fields only the server sets are ignored)."""
    if isinstance(desired, dict):
        live = live if isinstance(live, dict) else {}
        out = []
        for name, value in desired.items():
            out += desired_paths_differing(value, live.get(name), f"{prefix}.{name}")
        return out
    return [] if _same(desired, live) else [prefix]


@dataclass
class Change:
    obj: dict
    action: str  # create | update | unchanged | delete
    fields: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.action == "update":
            shown = ", ".join(path.lstrip(".") for path in self.fields[:6])
            more = f" and {len(self.fields) - 6} more" if len(self.fields) > 6 else ""
            return f"update {label(self.obj)}: {shown}{more}"
        return f"{self.action} {label(self.obj)}"


# Workloads carry the gpu-console/kind label; the quota renderers' objects do not.
QUOTA_SELECTOR = f"{MANAGED_BY}={MANAGER},!gpu-console/kind"


def plan(api: KubeApi, objects: list[dict], prune: list[Kind] | None = None) -> list[Change]:
    """What applying `objects` would change, asked of the API server (dryRun=All), without changing anything;
    then the console's objects of the `prune` kinds (served on this cluster) that `objects` no longer hold, to
    be deleted."""
    changes = _apply_plan(api, objects)
    wanted = {key(obj) for obj in objects}
    for kind in prune or []:
        for item in api.list(kind.path(), f"list {kind.plural}", labelSelector=QUOTA_SELECTOR):
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
            if key(item) not in wanted:
                changes.append(Change(item, "delete"))
    return changes


def _apply_plan(api: KubeApi, objects: list[dict]) -> list[Change]:
    changes: list[Change] = []
    new_namespaces: set[str] = set()
    for obj in objects:
        path = object_path(obj)
        live = api.get_or_none(path, f"read {label(obj)}")
        namespace = (obj.get("metadata") or {}).get("namespace", "")
        if live is None and namespace in new_namespaces:
            changes.append(Change(obj, "create"))  # a dry run in a namespace that does not exist yet is a 404
            continue
        try:
            after = api.apply(obj, path, f"dry-run apply {label(obj)}", dry_run=True)
        except NotFoundError:
            if live is None and namespace:
                changes.append(Change(obj, "create"))
                continue
            raise
        if live is None:
            changes.append(Change(obj, "create"))
            if obj.get("kind") == "Namespace":
                new_namespaces.add(obj["metadata"]["name"])
            continue
        fields = changed_paths(normalized(live), normalized(after))
        changes.append(Change(obj, "update" if fields else "unchanged", fields))
    return changes


def push(api: KubeApi, objects: list[dict], prune: list[Kind] | None = None) -> tuple[list[Change], int]:
    """Plan, then apply what changes, in the renderer's dependency order, then delete what the plan prunes.
    Returns (plan, objects applied or deleted)."""
    changes = plan(api, objects, prune)
    applied = 0
    for change in changes:
        if change.action in ("create", "update"):
            api.apply(change.obj, object_path(change.obj), f"apply {label(change.obj)}")
            applied += 1
    for change in changes:
        if change.action == "delete":
            with contextlib.suppress(NotFoundError):  # gone already: what the push wants
                api.request("DELETE", object_path(change.obj), f"delete {label(change.obj)}")
            applied += 1
    return changes, applied


@dataclass
class DriftReport:
    missing: list[str] = field(default_factory=list)
    changed: dict[str, list[str]] = field(default_factory=dict)  # object -> fields that differ from desired
    extra: list[str] = field(default_factory=list)
    inert: list[str] = field(default_factory=list)  # what the cluster's controllers would not act on, and why

    @property
    def clean(self) -> bool:
        return not (self.missing or self.changed or self.extra or self.inert)

    def lines(self) -> list[str]:
        out = [f"missing: {name}" for name in self.missing]
        out += [
            f"changed on the cluster: {name}: {', '.join(p.lstrip('.') for p in paths)}"
            for name, paths in self.changed.items()
        ]
        out += [f"not desired any more (left in place): {name}" for name in self.extra]
        out += [f"not acted on by the cluster: {line}" for line in self.inert]
        return out


def drift(api: KubeApi, objects: list[dict], served: set[str]) -> DriftReport:
    """Desired objects against what the cluster holds under the console's label (one list per kind), and what of
    them the cluster would not act on."""
    kinds: list[Kind] = [k for k in QUOTA_KINDS if not k.addon or k.addon in served]
    for obj in objects:
        if kind_of(obj) not in kinds:
            kinds.append(kind_of(obj))
    live: dict[tuple, dict] = {}
    selector = f"{MANAGED_BY}={MANAGER},!gpu-console/kind"  # workloads carry the kind label; quota objects do not
    for kind in kinds:
        for item in api.list(kind.path(), f"list {kind.plural}", labelSelector=selector):
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
            live[key(item)] = item
    report = DriftReport()
    wanted = set()
    for obj in objects:
        wanted.add(key(obj))
        current = live.get(key(obj))
        if current is None:
            report.missing.append(label(obj))
            continue
        paths = desired_paths_differing(normalized(obj), current)
        if paths:
            report.changed[label(obj)] = paths
    report.extra = sorted(label(item) for k, item in live.items() if k not in wanted)
    report.inert = semantic.inert(api, objects, served)
    return report
