"""Semantic drift: quota objects in place (or due) that the cluster's controllers would not act on.

The plain drift report compares objects with objects; these checks ask what the controllers would do with
them, from what the cluster holds now:

* Kueue admits a workload only through the LocalQueue its kueue.x-k8s.io/queue-name label names, in the
  workload's own namespace, and only if that LocalQueue's ClusterQueue exists; otherwise the suspended Job
  or gated pods wait forever (https://kueue.sigs.k8s.io/docs/concepts/local_queue/). Checked for the
  console's unfinished workloads.
* A ResourceFlavor's quota is for the nodes carrying its nodeLabels: Kueue injects them into the admitted
  pods' nodeSelector (https://kueue.sigs.k8s.io/docs/concepts/resource_flavor/), so a flavor no node
  matches admits workloads that can never be placed.
* A Volcano queue of a GPU pool (apps/backends/render/volcano.py) admits jobs that select the pool's nodes,
  named in its gpu-console/node-selector annotation; a pool without nodes holds quota nothing can use.

Pure functions over lists of objects from the API, plus `inert`, which reads them.
"""

from __future__ import annotations

from collections import defaultdict

from apps.backends.kubernetes.api import KubeApi
from apps.backends.kubernetes.resources import NODE, WORKLOAD_KINDS, Kind, kind_of
from apps.backends.render.objects import MANAGED_BY, MANAGER
from apps.backends.render.volcano import NODE_SELECTOR_ANNOTATION

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LOCAL_QUEUE = kind_of({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue"})
CLUSTER_QUEUE = kind_of({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue"})
SHOWN = 3  # workloads named per missing LocalQueue


def parse_selector(text: str) -> dict[str, str]:
    """ "k=v,k2=v2" (the equality form the renderer writes) as a dict."""
    out = {}
    for term in filter(None, (t.strip() for t in text.split(","))):
        key, _, value = term.partition("=")
        out[key] = value
    return out


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def unplaceable(objects: list[dict], nodes: list[dict]) -> list[str]:
    """ResourceFlavors and Volcano pool queues among `objects` whose node labels no node of `nodes` has."""
    node_labels = [(n.get("metadata") or {}).get("labels") or {} for n in nodes]
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "ResourceFlavor":
            selector = (obj.get("spec") or {}).get("nodeLabels") or {}
            what = "its quota admits workloads that no node can run"
        elif obj.get("kind") == "Queue" and NODE_SELECTOR_ANNOTATION in (meta.get("annotations") or {}):
            selector = parse_selector(meta["annotations"][NODE_SELECTOR_ANNOTATION])
            what = "the GPU pool's queues admit jobs that no node can run"
        else:
            continue
        if selector and not any(_matches(selector, labels) for labels in node_labels):
            shown = ", ".join(f"{k}={v}" for k, v in selector.items())
            out.append(f"{obj['kind']} {meta.get('name')}: no node has the labels {shown}; {what}")
    return out


def _finished(obj: dict) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def queueless(workloads: list[dict], local_queues: list[dict], cluster_queues: list[dict]) -> list[str]:
    """LocalQueues the console's unfinished workloads name that are missing, or point at no ClusterQueue."""
    queues = {(q["metadata"].get("namespace", ""), q["metadata"]["name"]): q for q in local_queues}
    existing = {q["metadata"]["name"] for q in cluster_queues}
    waiting: dict[tuple[str, str], list[str]] = defaultdict(list)
    for obj in workloads:
        meta = obj.get("metadata") or {}
        name = (meta.get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        if name and not _finished(obj):
            waiting[(meta.get("namespace", ""), name)].append(f"{obj.get('kind')} {meta.get('name')}")
    out = []
    for (namespace, name), users in sorted(waiting.items()):
        shown = ", ".join(sorted(users)[:SHOWN]) + (f" and {len(users) - SHOWN} more" if len(users) > SHOWN else "")
        queue = queues.get((namespace, name))
        if queue is None:
            out.append(
                f"LocalQueue {namespace}/{name}: missing, and the console's workloads in {namespace} name it "
                f"({shown}); Kueue never admits them"
            )
            continue
        target = (queue.get("spec") or {}).get("clusterQueue", "")
        if target not in existing:
            out.append(
                f"LocalQueue {namespace}/{name}: its ClusterQueue {target!r} does not exist; Kueue never admits "
                f"the console's workloads that name it ({shown})"
            )
    return out


def _listed(api: KubeApi, kind: Kind, what: str, **selectors: str) -> list[dict]:
    items = api.list(kind.path(), what, **selectors)
    for item in items:
        item.setdefault("apiVersion", kind.api_version)
        item.setdefault("kind", kind.kind)
    return items


def inert(api: KubeApi, objects: list[dict], served: set[str]) -> list[str]:
    """What of the desired quota objects and the console's workloads the cluster's controllers would not act on."""
    nodes = api.list(NODE.path(), "list nodes")
    out = unplaceable(objects, nodes)
    if "kueue" in served:
        selector = f"{MANAGED_BY}={MANAGER},{KUEUE_QUEUE_LABEL}"
        workloads = [
            item
            for kind in WORKLOAD_KINDS
            if kind.addon in ("", "lws") and (not kind.addon or kind.addon in served)
            for item in _listed(api, kind, f"list {kind.plural}", labelSelector=selector)
        ]
        local_queues = _listed(api, LOCAL_QUEUE, "list localqueues")
        cluster_queues = _listed(api, CLUSTER_QUEUE, "list clusterqueues")
        out += queueless(workloads, local_queues, cluster_queues)
    return out
