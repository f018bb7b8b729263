"""Node pools' image pre-pull lists as Kubernetes objects: one DaemonSet per pool, pushed with the quota objects.

A large engine image (vLLM, SGLang: many GB) pulled when a replica is scheduled adds minutes to every cold start
on a node that has not run it. A pool that lists its images keeps them on every one of its nodes ahead of time,
with the single-use DaemonSet pattern: one init container per image, each running a no-op command in that image
(`sh -c true`), so the kubelet pulls it (imagePullPolicy IfNotPresent: pulled once per node); then a pause container
keeps the pod, so the DaemonSet does not restart it (a DaemonSet's pods are always restarted:
https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/). A node joining the pool gets its pod, and
so the images, before work lands on it.

The DaemonSet selects the pool's nodes with the pool's node label and tolerates the pool's taints; the DaemonSet
controller adds its own tolerations (not-ready, unschedulable, ...), so a cordoned node keeps its images. Every
pre-pull DaemonSet lives in the namespace PREPULL_NAMESPACE. Its pods request almost nothing (the init containers'
requests count only while they run). A pool whose list is emptied loses its DaemonSet at the next push (the push
prunes the console's DaemonSets it no longer renders); the images stay on the nodes until the kubelet's image
garbage collection removes them.
"""

from __future__ import annotations

from apps.backends.render.desired import DesiredState, PrepullPool
from apps.backends.render.errors import RenderError
from apps.backends.render.names import (
    dns_label,
    image_error,
    is_label_value,
    is_qualified_name,
    require_dns_label,
)
from apps.backends.render.objects import TAINT_EFFECTS, labels, meta, obj, toleration

PREPULL_NAMESPACE = "gpu-console-prepull"
POOL_LABEL = "gpu-console/prepull-pool"
# The pause image of Kubernetes 1.31+ (registry.k8s.io/pause, kubeadm's default sandbox image).
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
NOOP = ["sh", "-c", "true"]
# A new image list rolls out to a quarter of the pool's nodes at a time: fast, without every node of a large pool
# pulling many GB from the registry at once.
MAX_UNAVAILABLE = "25%"


def daemon_set_name(pool: str) -> str:
    return dns_label(f"prepull-{pool}")  # shortened with a hash past 63 characters


def prepull_objects(state: DesiredState) -> tuple[list[dict], list[str]]:
    """(objects, caveats): the namespace and one DaemonSet per pool with images and a node label to select by."""
    objects: list[dict] = []
    caveats: list[str] = []
    for pool in sorted(state.prepull, key=lambda p: p.name):
        if not pool.images:
            continue
        if not pool.node_labels:
            caveats.append(
                f"Pool {pool.name} lists images to pre-pull, but no node label selects its nodes only (a pool "
                "label such as gpu-console/pool, or the GPU model's product label): nothing is pre-pulled there."
            )
            continue
        objects.append(_daemon_set(pool))
    if not objects:
        return [], caveats
    caveats.append(
        f"Pre-pull DaemonSets (namespace {PREPULL_NAMESPACE}) run `{' '.join(NOOP)}` in each image to pull it: every "
        "listed image needs a shell. Images stay on the nodes until the kubelet's image garbage collection."
    )
    return [obj("v1", "Namespace", meta(PREPULL_NAMESPACE, label_set=labels())), *objects], caveats


def _daemon_set(pool: PrepullPool) -> dict:
    where = f"pool {pool.name}"
    require_dns_label(pool.name, f"{where}: name")
    selector = {POOL_LABEL: pool.name}
    init = []
    for i, image in enumerate(pool.images):
        if (problem := image_error(image)) is not None:
            raise RenderError(f"{where}: prepull_images[{i}]", str(problem))
        init.append(
            {
                "name": f"pull-{i}",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": list(NOOP),
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
            }
        )
    for key, value in pool.node_labels:
        if not is_qualified_name(key) or not is_label_value(value):
            raise RenderError(f"{where}: node label", f"{key}={value!r} is not a node label and value")
    pod: dict = {
        "nodeSelector": dict(pool.node_labels),
        **({"tolerations": _tolerations(pool)} if pool.taints else {}),
        "terminationGracePeriodSeconds": 5,
        "initContainers": init,
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "16Mi"}},
            }
        ],
    }
    return obj(
        "apps/v1",
        "DaemonSet",
        meta(daemon_set_name(pool.name), namespace=PREPULL_NAMESPACE, label_set={**labels(), **selector}),
        spec={
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": MAX_UNAVAILABLE}},
            "template": {"metadata": {"labels": {**labels(), **selector}}, "spec": pod},
        },
    )


def _tolerations(pool: PrepullPool) -> list[dict]:
    """The pool's taints as tolerations: Equal with a value, Exists without one (as its workloads get them)."""
    out = []
    for taint in pool.taints:
        key, value, effect = taint.get("key", ""), taint.get("value", "") or "", taint.get("effect", "")
        if not is_qualified_name(key) or not is_label_value(value) or (effect and effect not in TAINT_EFFECTS):
            raise RenderError(f"pool {pool.name}: taint", f"{taint!r} is not a taint")
        out.append(toleration(key, "Equal" if value else "Exists", value, effect))
    return out
