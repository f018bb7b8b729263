"""Helpers for the tests of the control-plane model: create objects through the fake API server's request path
(so admission webhooks and plugins apply, as they would to the console's requests), and small manifests."""

from __future__ import annotations

import copy

from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.k8s_fake.resources import RESOURCES


def create(fake: FakeKubernetes, obj: dict) -> dict:
    """POST `obj` as a client would (raises the fake's ApiError on a refusal); the control plane then runs."""
    group, _, version = obj["apiVersion"].rpartition("/")
    resource = next(r for r in RESOURCES if (r.group, r.version, r.kind) == (group, version, obj["kind"]))
    ns = obj["metadata"].get("namespace", "")
    path = resource.prefix + (f"/namespaces/{ns}" if resource.namespaced else "") + f"/{resource.plural}"
    _, created = fake.handle("POST", path, {}, {"content-type": "application/json"}, copy.deepcopy(obj))
    return created


def container(gpus: int = 0, cpu: str = "1", memory: str = "4Gi", resource: str = "nvidia.com/gpu", **more) -> dict:
    requests = {"cpu": cpu, "memory": memory, **({resource: str(gpus)} if gpus else {}), **more}
    limits = {k: v for k, v in requests.items() if k not in ("cpu", "memory")}
    return {
        "name": "main",
        "image": "busybox",
        "command": ["sleep", "60"],
        "resources": {"requests": requests, **({"limits": limits} if limits else {})},
    }


def pod_template(gpus: int = 0, *, labels: dict | None = None, **spec) -> dict:
    resources = spec.pop("resources", {})
    return {
        "metadata": {"labels": labels or {"app": "x"}},
        "spec": {"restartPolicy": "Never", "containers": [container(gpus, **resources)], **spec},
    }


def job(name: str, ns: str, gpus: int = 1, *, parallelism: int = 1, labels: dict | None = None, **spec) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "completionMode": "Indexed",
            "template": pod_template(gpus, **spec),
        },
    }


def flavor(name: str, node_labels: dict | None = None, **spec) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {**({"nodeLabels": node_labels} if node_labels else {}), **spec},
    }


def cluster_queue(name: str, flavors: dict[str, dict[str, object]], *, covered=None, **spec) -> dict:
    """flavors: {flavor: {resource: nominal or {nominalQuota, borrowingLimit, lendingLimit}}}, one resource group."""
    covered = covered or sorted({r for quotas in flavors.values() for r in quotas})
    group = {
        "coveredResources": covered,
        "flavors": [
            {
                "name": f,
                "resources": [
                    {"name": r, **(q if isinstance(q, dict) else {"nominalQuota": q})}
                    for r, q in sorted(quotas.items())
                ],
            }
            for f, quotas in flavors.items()
        ],
    }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": [group], **spec},
    }


def local_queue(name: str, ns: str, cq: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": cq},
    }


def workload_of(fake: FakeKubernetes, owner_name: str, ns: str) -> dict | None:
    for wl in fake.objects("kueue.x-k8s.io", "v1beta2", "workloads"):
        ref = (wl["metadata"].get("ownerReferences") or [{}])[0]
        if ref.get("name") == owner_name and wl["metadata"]["namespace"] == ns:
            return wl
    return None


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def pods(fake: FakeKubernetes, ns: str, prefix: str = "") -> list[dict]:
    return sorted(
        (
            p
            for p in fake.objects("", "v1", "pods")
            if p["metadata"]["namespace"] == ns and p["metadata"]["name"].startswith(prefix)
        ),
        key=lambda p: p["metadata"]["name"],
    )


def events(fake: FakeKubernetes, name: str) -> list[str]:
    return [
        f"{e['reason']}: {e['message']}"
        for e in fake.objects("", "v1", "events")
        if e["involvedObject"]["name"] == name
    ]
