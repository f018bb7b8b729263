"""A fake Kubernetes API server over real HTTP, for the official client.

    fake = FakeKubernetes(addons={"kueue", "lws", "keda"}).start()   # ThreadingHTTPServer on 127.0.0.1:<free port>
    fake.url                        # http://127.0.0.1:<port>
    fake.add_node("gpu-1", gpus=8)  # seed objects directly (no request recorded); MIG, HAMi, time-slicing, taints
    FakeKubernetes(kueue=KueueConfig(exclude_resource_prefixes=("cpu", "memory")), hami=True)  # controller setups
    fake.requests                   # every request: method, path, query, content type, body
    fake.fail(500, times=1, method="GET", path="/api/v1/nodes")   # inject errors, hangs (fake.hang(...))
    fake.advance(30)                # let 30 s of fake time pass (the control plane runs)
    fake.write_log("ns", "pod-0", "step 1")   # a running container prints lines: GET .../pods/pod-0/log reads them
    fake.stop()                     # connection refused from now on

What it emulates: discovery (/version, /api, /apis, APIResourceLists with the installed add-ons' groups),
get / list (label and field selectors, limit / continue) / create / PUT / delete (propagation, grace) for
the resources in `resources.py`, JSON, merge and (partly) strategic merge patch with resourceVersion
preconditions (409), server-side apply with field managers, conflicts and force, dryRun=All, the Eviction
subresource with PodDisruptionBudgets (429), the pod log subresource with `tailLines` and `follow` (logs.py),
bearer-token authentication (401), and a semantic model of the
control plane (`cluster.py`: Kueue, Volcano, kube-scheduler, HAMi, LWS, KEDA, with the admission webhooks and
plugins they install), and watch (watch.py: resourceVersions, bookmarks, 410 Gone after `fake.compact()`,
timeoutSeconds, a dropped connection with `fake.drop_watch_after = n`). What it does not: RBAC, CEL, schema
validation (tests validate what the backend sends separately), protobuf, server-side table output.
"""

from __future__ import annotations

import contextlib
import copy
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.backends.k8s_fake import hami, logs, patching, watch
from tests.backends.k8s_fake.cluster import ControlPlane
from tests.backends.k8s_fake.images import ImagePuller
from tests.backends.k8s_fake.kueue import KueueConfig
from tests.backends.k8s_fake.resources import ADDONS, DEFAULT_ADDONS, Resource, find, served
from tests.backends.k8s_fake.store import ApiError, Store, conflict, patched, timestamp
from tests.backends.k8s_fake.workloads import exit_containers

SERVER_VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.2",
    "gitCommit": "a57b6f7709f6c2722b92f07b8b4c48210a51fc40",
    "gitTreeState": "clean",
    "buildDate": "2025-06-17T18:36:31Z",
    "goVersion": "go1.24.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _puller(image_pull_s: float | dict[str, float] | None) -> ImagePuller | None:
    if image_pull_s is None:
        return None
    if isinstance(image_pull_s, dict):
        return ImagePuller(lambda image: image_pull_s.get(image, 0.0))
    return ImagePuller(lambda image: float(image_pull_s))


@dataclass
class Request:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: object
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Fault:
    code: int  # 0: hang for `seconds` instead of answering
    times: int
    method: str | None
    path: str | None
    message: str
    seconds: float = 0.0
    details: dict | None = None
    reason: str = ""

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (self.path is None or self.path in path)


REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class FakeKubernetes:
    """The fake API server and its state. Thread-safe: one lock around every request and seeding call."""

    def __init__(
        self,
        addons: set[str] | None = None,
        token: str | None = None,
        control_plane: bool = True,
        *,
        kueue: KueueConfig | None = None,
        hami: bool = False,
        lws_gang: str = "",
        image_pull_s: float | dict[str, float] | None = None,
    ):
        """`kueue`: the Kueue Configuration's resource settings (default: Kueue's defaults); `hami`: HAMi's
        webhook and scheduler are installed; `lws_gang`: the LWS controller's
        gangSchedulingManagement.schedulerProvider ("volcano"; default none, as LWS ships); `image_pull_s`: how long
        the kubelets take to pull an image (seconds for every image, or per image, others at once): nodes then hold
        the images they pulled and a pod waits for its pulls (images.py). None: images are there at once."""
        addons = set(DEFAULT_ADDONS if addons is None else addons)
        unknown = addons - set(ADDONS)
        if unknown:
            raise ValueError(f"unknown add-ons {sorted(unknown)}; known: {ADDONS}")
        self.addons = addons
        self.token = token
        self.resources = served(addons)
        self.offset = timedelta(0)
        self.lock = threading.RLock()
        self.store = Store(self.now)
        self.control = ControlPlane(self.store, self.resources, kueue, hami, lws_gang, _puller(image_pull_s))
        self.control_plane = control_plane
        self.requests: list[Request] = []
        self.record = True
        self.faults: list[Fault] = []
        self._stopping = threading.Event()
        # What each container wrote, by (pod uid, container): the kubelet keeps a container's log with its pod.
        self.logs: dict[tuple[str, str], list[str]] = {}
        self.log_written = threading.Condition(self.lock)
        # Watches (watch.py) wait on this for changes; `drop_watch_after`: the next watch's connection breaks after
        # that many events (fault injection).
        self.watch_changed = threading.Condition(self.lock)
        self.store.changed = self._wake_watches
        self.drop_watch_after: int | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        if "volcano" in self.addons:
            # Volcano's installation creates the root queue and the default queue (https://volcano.sh/en/docs/queue/).
            for name, spec in (("root", {}), ("default", {"parent": "root"})):
                self.seed(
                    "scheduling.volcano.sh",
                    "v1beta1",
                    "queues",
                    {
                        "metadata": {"name": name},
                        "spec": {"weight": 1, "reclaimable": True, **spec},
                        "status": {"state": "Open"},
                    },
                )

    # lifecycle

    def start(self, port: int = 0) -> FakeKubernetes:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._httpd.daemon_threads = True
        self._stopping.clear()
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-k8s", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop listening: new connections are refused. Wakes any request hanging on an injected fault."""
        self._stopping.set()
        with self.log_written:
            self.log_written.notify_all()  # followed logs end
            self.watch_changed.notify_all()  # and watches
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def _wake_watches(self) -> None:
        # A change made without the lock (seeding before start) has no watch waiting yet.
        with contextlib.suppress(RuntimeError):
            self.watch_changed.notify_all()

    def compact(self) -> None:
        """Forget the change history, as etcd's compaction does: a watch from an older resourceVersion gets 410."""
        with self.lock:
            self.store.compact()

    # time

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.offset += timedelta(seconds=seconds)
            self.tick()

    def tick(self) -> None:
        with self.lock:
            if self.control_plane:
                self.control.tick(self.now())

    # failure injection

    def fail(
        self,
        code: int,
        *,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        message: str = "",
        details: dict | None = None,
        reason: str = "",
    ) -> None:
        """Answer the next `times` matching requests with `code` and a Status (`reason` defaults by code)."""
        message = message or f"injected {code} {REASONS.get(code, '')}".strip()
        self.faults.append(Fault(code, times, method, path, message, details=details, reason=reason))

    def hang(self, seconds: float, *, times: int = 1, method: str | None = None, path: str | None = None) -> None:
        self.faults.append(Fault(0, times, method, path, "hang", seconds=seconds))

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.matches(method, path):
                    fault.times -= 1
                    return fault
        return None

    # seeding and inspection (no request recorded)

    def resource(self, group: str, version: str, plural: str) -> Resource:
        found = find(self.resources, group, version, plural)
        if found is None:
            raise KeyError(f"{group}/{version}/{plural} is not served (add-ons: {sorted(self.addons)})")
        return found

    def seed(self, group: str, version: str, plural: str, obj: dict) -> dict:
        with self.lock:
            resource = self.resource(group, version, plural)
            ns = obj.get("metadata", {}).get("namespace", "") if resource.namespaced else ""
            created = self.store.create(resource, ns, obj)
            if "status" in obj:
                created["status"] = copy.deepcopy(obj["status"])
            return created

    def get(self, group: str, version: str, plural: str, name: str, ns: str = "") -> dict | None:
        with self.lock:
            return copy.deepcopy(self.store.bucket(self.resource(group, version, plural)).get((ns, name)))

    def objects(self, group: str, version: str, plural: str) -> list[dict]:
        with self.lock:
            return copy.deepcopy(self.store.all(self.resource(group, version, plural).group, plural))

    def add_namespace(self, name: str, labels: dict | None = None) -> dict:
        return self.seed("", "v1", "namespaces", {"metadata": {"name": name, "labels": labels or {}}})

    def add_node(
        self,
        name: str,
        *,
        gpus: int = 8,
        allocatable: int | None = None,
        product: str = "NVIDIA-H100-80GB-HBM3",
        memory_mib: int = 81559,
        labels: dict | None = None,
        taints: list | None = None,
        ready: bool = True,
        extra_resources: dict | None = None,
        annotations: dict | None = None,
        resource: str = "nvidia.com/gpu",
        cpu: str = "128",
        memory: str = "2113536Mi",
        pods: int = 110,
        mig: dict[str, int] | None = None,
        mig_strategy: str = "mixed",
        time_slicing: int = 0,
        mps: int = 0,
        rename_by_default: bool = False,
        hami_split: int = 0,
        unschedulable: bool = False,
        images: list[str] | None = None,
    ) -> dict:
        """A GPU node as the NVIDIA device plugin and GPU Feature Discovery present it
        (https://github.com/NVIDIA/k8s-device-plugin, https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/):

        - `resource`: the name the device plugin advertises (`nvidia.com/gpu`; a Volcano cluster set up with
          per-model names would advertise e.g. `nvidia.com/gpu-h100`);
        - `mig`: MIG profiles and counts, e.g. {"1g.10gb": 7}: with the mixed strategy each profile is its own
          resource `nvidia.com/mig-<profile>` (and `gpus` stays the count of whole GPUs, often 0); with the single
          strategy they are `nvidia.com/gpu` and the product label ends in `-MIG-<profile>`;
        - `time_slicing`: replicas per GPU: `nvidia.com/gpu` is gpus x replicas, the product label gains `-SHARED`
          (or, with `rename_by_default`, the resource is `nvidia.com/gpu.shared`), and `nvidia.com/gpu.replicas` /
          `nvidia.com/gpu.sharing-strategy` (time-slicing) are set;
        - `mps`: replicas per GPU with sharing.mps, the same resources and labels with sharing-strategy `mps`
          (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing-mps.html); MPS is
          not supported on MIG devices and serves at most 48 clients per GPU, so no such node exists;
        - `hami_split`: HAMi's device plugin: `nvidia.com/gpu` is gpus x split and the devices are registered in the
          `hami.io/node-nvidia-register` annotation (see hami.py);
        - cpu, memory and pods are the node's capacity and allocatable;
        - `images`: the images the node holds already (`status.images`; what a pod needs no pull for, images.py)."""
        extra_labels: dict[str, str] = {"nvidia.com/gpu.count": str(gpus)}
        advertised = {resource: gpus}
        annotations = dict(annotations or {})
        if mig:
            if mig_strategy == "single":
                profile, count = next(iter(mig.items()))
                advertised = {"nvidia.com/gpu": count}
                product = f"{product}-MIG-{profile}"
            else:
                advertised.update({f"nvidia.com/mig-{p}": c for p, c in mig.items()})
                extra_labels.update({f"nvidia.com/mig-{p}.count": str(c) for p, c in mig.items()})
            extra_labels["nvidia.com/mig.strategy"] = mig_strategy
        if mps and (mig or time_slicing or not 2 <= mps <= 48):
            raise ValueError("sharing.mps: 2-48 replicas of whole GPUs, without MIG or time-slicing")
        replicas, strategy = (mps, "mps") if mps else (time_slicing, "time-slicing")
        if replicas > 1:
            shared = "nvidia.com/gpu.shared" if rename_by_default else resource
            advertised = {shared: gpus * replicas}
            if not rename_by_default:
                product = f"{product}-SHARED"
            extra_labels.update({"nvidia.com/gpu.replicas": str(replicas), "nvidia.com/gpu.sharing-strategy": strategy})
        if hami_split:
            advertised = {"nvidia.com/gpu": gpus * hami_split}
            annotations[hami.REGISTER] = hami.register(gpus, memory_mib, hami_split, product, name)
            extra_labels["gpu"] = "on"
        capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), **{k: str(v) for k, v in advertised.items()}}
        capacity.update(extra_resources or {})
        alloc = dict(capacity)
        if allocatable is not None:
            alloc[resource] = str(allocatable)
        node = {
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "nvidia.com/gpu.product": product,
                    "nvidia.com/gpu.memory": str(memory_mib),
                    **extra_labels,
                    **(labels or {}),
                },
                "annotations": annotations,
            },
            "spec": {**({"taints": taints} if taints else {}), **({"unschedulable": True} if unschedulable else {})},
            "status": {
                "capacity": capacity,
                "allocatable": alloc,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady" if ready else "KubeletNotReady",
                        "message": "kubelet is posting ready status" if ready else "container runtime is down",
                    }
                ],
                **({"images": [{"names": [image], "sizeBytes": 0} for image in images]} if images else {}),
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": name,
                    "containerRuntimeVersion": "containerd://1.7.27",
                    "kernelVersion": "6.1.0-37-amd64",
                    "kubeProxyVersion": SERVER_VERSION["gitVersion"],
                    "kubeletVersion": SERVER_VERSION["gitVersion"],
                    "machineID": name,
                    "operatingSystem": "linux",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "systemUUID": name,
                },
            },
        }
        return self.seed("", "v1", "nodes", node)

    def add_hypernode(self, name: str, tier: int, *, nodes: list[str] = (), hypernodes: list[str] = ()) -> dict:
        """A Volcano HyperNode (topology.volcano.sh/v1alpha1): a switch whose members are nodes (tier 1) or the
        HyperNodes of the tier below (https://volcano.sh/en/docs/network_topology_aware_scheduling/)."""
        members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
        members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": h}}} for h in hypernodes]
        return self.seed(
            "topology.volcano.sh",
            "v1alpha1",
            "hypernodes",
            {"metadata": {"name": name}, "spec": {"tier": tier, "members": members}},
        )

    def scale_metric(self, namespace: str, scaled_object: str, replicas: int | None) -> None:
        """What KEDA's triggers would ask for (None: the triggers are inactive); see keda.py."""
        with self.lock:
            if replicas is None:
                self.control.keda_metrics.pop((namespace, scaled_object), None)
            else:
                self.control.keda_metrics[(namespace, scaled_object)] = replicas
            self.tick()

    def add_pod(
        self,
        name: str,
        ns: str,
        node: str = "",
        *,
        gpus: int = 0,
        labels: dict | None = None,
        phase: str = "Running",
        owner: dict | None = None,
        annotations: dict | None = None,
        started: datetime | None = None,
    ) -> dict:
        requests = {"nvidia.com/gpu": str(gpus)} if gpus else {}
        pod = {
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {
                "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}],
                **({"nodeName": node} if node else {}),
            },
            "status": {"phase": phase},
        }
        if owner:
            pod["metadata"]["ownerReferences"] = [owner]
        if phase == "Running":
            pod["status"]["startTime"] = timestamp(started or self.now())
        return self.seed("", "v1", "pods", pod)

    def crash(self, ns: str, name: str, exit_code: int = 1) -> None:
        """The main container of running pod `name` exits with `exit_code` now, as a training process does when
        its GPU fails under it (an XID 79 surfaces as a CUDA error); the kubelet reports the pod Failed."""
        with self.lock:
            pods = self.resource("", "v1", "pods")
            pod = self.store.bucket(pods).get((ns, name))
            assert pod is not None and pod["status"].get("phase") == "Running", f"no running pod {ns}/{name}"
            exit_containers(pod, self.now(), exit_code)
            self.store.put(pods, pod)
            self.tick()

    def write_log(self, ns: str, name: str, *lines: str, container: str = "") -> None:
        """Running pod `name`'s container (its only one, or `container`) prints `lines`, as the program in it would:
        the pod log endpoint serves them, and a followed log sends them at once."""
        with self.lock:
            pod = self.store.bucket(self.resource("", "v1", "pods")).get((ns, name))
            assert pod is not None, f"no pod {ns}/{name}"
            container = container or pod["spec"]["containers"][0]["name"]
            assert logs.is_running(pod, container), f"container {container} of {ns}/{name} is not running"
            self.logs.setdefault((pod["metadata"]["uid"], container), []).extend(lines)
            self.log_written.notify_all()

    def pod_log(self, ns: str, name: str, query: dict[str, str]) -> tuple[bytes, Iterator[bytes] | None]:
        """The pod log subresource (logs.py): (what is there to send now, the followed rest or None), or the
        ApiError the API server answers instead."""
        with self.lock:
            self.tick()
            logs.unsupported(query)
            tail = logs.tail_lines(query, name)
            pod = self.store.get(self.resource("", "v1", "pods"), ns, name)
            container = logs.container_for(pod, query.get("container", ""))
            if not (pod.get("spec") or {}).get("nodeName"):
                return b"", None  # not bound: no kubelet to ask, an empty log
            logs.check_started(pod, container)
            uid = pod["metadata"]["uid"]
            written = list(self.logs.get((uid, container), []))
            shown = written[len(written) - tail :] if tail is not None else written
            rest = None
            if query.get("follow") == "true" and logs.is_running(pod, container):
                rest = logs.follow(self, uid, (ns, name, container), len(written))
            return logs.encode(shown), rest

    def reset_requests(self) -> None:
        with self.lock:
            self.requests = []

    def requests_to(self, method: str, path_part: str = "") -> list[Request]:
        return [r for r in self.requests if r.method == method and path_part in r.path]

    # request handling

    def authenticate(self, headers: dict) -> None:
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def handle(self, method: str, path: str, query: dict[str, str], headers: dict, body: object) -> tuple[int, dict]:
        self.authenticate(headers)
        path = path.rstrip("/") or "/"
        with self.lock:
            self.tick()
            if path == "/version":
                return 200, dict(SERVER_VERSION)
            if path == "/api":
                return 200, {"kind": "APIVersions", "versions": ["v1"]}
            if path == "/apis":
                return 200, self._group_list()
            parts = path.strip("/").split("/")
            if parts[0] == "api" and len(parts) >= 2:
                group, version, rest = "", parts[1], parts[2:]
            elif parts[0] == "apis" and len(parts) >= 3:
                group, version, rest = parts[1], parts[2], parts[3:]
            else:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if not rest:
                return 200, self._resource_list(group, version)
            code, payload = self._resource_request(method, group, version, rest, query, headers, body)
            if method != "GET":
                payload = copy.deepcopy(payload)  # the answer is the object as written, before controllers act
                self.tick()  # controllers react to a write at once, as a real control plane does within moments
            return code, payload

    def watch(self, path: str, query: dict[str, str], headers: dict):
        """A watch request's stream (watch.py), or the ApiError answered instead."""
        self.authenticate(headers)
        parts = path.rstrip("/").strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        with self.lock:
            self.tick()
            resource, ns, name, sub = self._locate(group, version, rest)
            if name or sub:
                raise ApiError(405, "MethodNotAllowed", "watch a collection (a single object: fieldSelector)")
            return watch.start(self, resource, ns, query)

    def _group_list(self) -> dict:
        groups: dict[str, list[str]] = {}
        for r in self.resources:
            if r.group and r.version not in groups.setdefault(r.group, []):
                groups[r.group].append(r.version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": name,
                    "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in versions],
                    "preferredVersion": {"groupVersion": f"{name}/{versions[0]}", "version": versions[0]},
                }
                for name, versions in groups.items()
            ],
        }

    def _resource_list(self, group: str, version: str) -> dict:
        found = [r for r in self.resources if r.group == group and r.version == version]
        if not found:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        entries = []
        for r in found:
            verbs = ["create", "delete", "get", "list", "patch", "update"]
            entries.append(
                {"name": r.plural, "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": verbs}
            )
            for sub in r.subresources:
                sub_verbs = {"eviction": ["create"], "log": ["get"]}.get(sub, ["get", "patch", "update"])
                kind = {"eviction": "Eviction", "log": "Pod"}.get(sub, r.kind)
                entries.append(
                    {
                        "name": f"{r.plural}/{sub}",
                        "singularName": "",
                        "namespaced": r.namespaced,
                        "kind": kind,
                        "verbs": sub_verbs,
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": found[0].group_version,
            "resources": entries,
        }

    def _locate(self, group: str, version: str, rest: list[str]) -> tuple[Resource, str, str, str]:
        """(resource, namespace, name, subresource) of a resource path below the group/version prefix."""
        ns = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and find(self.resources, group, version, rest[2]):
            ns, rest = rest[1], rest[2:]
        resource = find(self.resources, group, version, rest[0])
        if resource is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if ns and not resource.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if (sub and sub not in resource.subresources) or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return resource, ns, name, sub

    def _resource_request(self, method, group, version, rest, query, headers, body) -> tuple[int, dict]:
        resource, ns, name, sub = self._locate(group, version, rest)
        if sub == "log":  # GET is served by pod_log; the subresource has no other verb
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        dry_run = query.get("dryRun") == "All"
        store = self.store
        if method == "GET" and not name:
            items, token = store.list(
                resource,
                ns,
                label_selector=query.get("labelSelector", ""),
                field_selector=query.get("fieldSelector", ""),
                limit=int(query.get("limit", 0) or 0),
                token=query.get("continue", ""),
            )
            meta = {"resourceVersion": str(store.rv)}
            if token:
                meta["continue"] = token
            return 200, {
                "kind": f"{resource.kind}List",
                "apiVersion": resource.group_version,
                "metadata": meta,
                "items": items,
            }
        if method == "POST" and not name:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the request body must be an object")
            body = copy.deepcopy(body)
            if self.control_plane:
                self.control.admit(resource, ns, body)
            return 201, store.create(resource, ns, body, dry_run=dry_run)
        if not name:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
        key_ns = ns if resource.namespaced else ""
        if method == "POST" and sub == "eviction":
            pod = store.get(resource, key_ns, name)
            options = (body or {}).get("deleteOptions") or {}
            if (body or {}).get("metadata", {}).get("name") not in (None, name):
                raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
            self.control.evict(
                pod, options.get("gracePeriodSeconds"), self.now(), dry_run or options.get("dryRun") == ["All"]
            )
            return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        if method == "GET":
            return 200, store.get(resource, key_ns, name)
        if method == "PATCH" and headers.get("content-type", "").split(";")[0] == "application/apply-patch+yaml":
            return self._apply(resource, key_ns, name, query, body, dry_run)
        if method == "PATCH":
            live = store.get(resource, key_ns, name)
            new = patched(live, body, headers.get("content-type", "").split(";")[0], resource)
            if dry_run:
                return 200, new
            if new != live:
                store.put(resource, new)
            return 200, new
        if method == "PUT":
            live = store.get(resource, key_ns, name)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the request body must be an object")
            wanted = (body.get("metadata") or {}).get("resourceVersion")
            if wanted != live["metadata"]["resourceVersion"]:
                raise conflict(resource, name)
            new = copy.deepcopy(body)
            for key in ("uid", "creationTimestamp", "generation"):
                new["metadata"][key] = live["metadata"].get(key)
            if self.control_plane:
                self.control.validate(resource, new)
            return 200, new if dry_run else store.put(resource, new)
        if method == "DELETE":
            return self._delete(resource, key_ns, name, query, body, dry_run)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed")

    def _apply(self, resource, ns, name, query, body, dry_run) -> tuple[int, dict]:
        manager = query.get("fieldManager", "")
        if not manager:
            raise ApiError(400, "BadRequest", "PATCH with apply-patch+yaml requires the fieldManager parameter")
        config = yaml.safe_load(body) if isinstance(body, str) else body
        if not isinstance(config, dict):
            raise ApiError(400, "BadRequest", "an apply configuration must be an object")
        if config.get("apiVersion") != resource.group_version or config.get("kind") != resource.kind:
            raise ApiError(
                400,
                "BadRequest",
                f"apiVersion/kind {config.get('apiVersion')}/{config.get('kind')} do not match the URL's "
                f"{resource.group_version}/{resource.kind}",
            )
        meta = config.get("metadata") or {}
        if meta.get("name") != name or (resource.namespaced and meta.get("namespace", ns) != ns):
            raise ApiError(422, "Invalid", "metadata.name / metadata.namespace do not match the URL")
        force = query.get("force") == "true"
        key = (resource.group, resource.plural, ns, name)
        live = self.store.bucket(resource).get((ns, name))
        applied = copy.deepcopy(self.store.applied.get(key, {}))
        try:
            merged = patching.apply(live, config, manager, applied, force)
        except patching.ApplyConflict as exc:
            raise ApiError(409, "Conflict", str(exc)) from exc
        now = timestamp(self.now())
        if live is None:
            merged.setdefault("metadata", {})["managedFields"] = _managed(applied, resource, now)
            if self.control_plane:
                self.control.admit(resource, ns, merged)
            created = self.store.create(resource, ns, merged, dry_run=dry_run)
            if not dry_run:
                self.store.applied[key] = applied
            return 201, created
        merged["metadata"]["managedFields"] = _managed(applied, resource, now, live)
        if self.control_plane:
            self.control.validate(resource, merged)
        if merged == live or dry_run:
            return 200, merged
        self.store.applied[key] = applied
        return 200, self.store.put(resource, merged)

    def _delete(self, resource, ns, name, query, body, dry_run) -> tuple[int, dict]:
        live = self.store.get(resource, ns, name)
        options = body if isinstance(body, dict) else {}
        policy = options.get("propagationPolicy") or query.get("propagationPolicy")
        grace = options.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        if policy not in (None, "Foreground", "Background", "Orphan"):
            raise ApiError(
                400, "BadRequest", f"propagationPolicy {policy!r} is not one of Foreground, Background, Orphan"
            )
        if dry_run:
            return 200, live
        if resource.kind == "Job" and resource.group == "batch" and policy is None:
            policy = "Orphan"  # batch/v1 Jobs deleted through the API orphan their pods unless told otherwise
        if policy == "Foreground" and resource.kind != "Pod":
            if not live["metadata"].get("deletionTimestamp"):
                live["metadata"]["deletionTimestamp"] = timestamp(self.now())
                live["metadata"]["finalizers"] = [*live["metadata"].get("finalizers", []), "foregroundDeletion"]
                self.store.put(resource, live)
            return 200, live
        if policy == "Orphan":
            for pod in self.control._pods_of(live):
                pod["metadata"]["ownerReferences"] = [
                    r for r in pod["metadata"]["ownerReferences"] if r.get("uid") != live["metadata"]["uid"]
                ]
        self.control.delete_pod_or_object(resource, live, self.now(), None if grace is None else int(grace))
        return 200, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "kind": resource.plural, "uid": live["metadata"]["uid"]},
        }


def _managed(applied: dict[str, dict], resource: Resource, now: str, live: dict | None = None) -> list[dict]:
    previous = {m["manager"]: m for m in ((live or {}).get("metadata") or {}).get("managedFields", [])}
    return [
        previous.get(manager)
        or {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": resource.group_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
        for manager in sorted(applied)
    ]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeKubernetes

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate writes: without this, Nagle's algorithm and delayed ACKs add
        # 40 ms to every request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format, *args) -> None:
        pass

    def _serve(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode() if length else ""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0]
        body: object = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw  # YAML apply configurations stay text
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.fake
        if fake.record:
            with fake.lock:
                fake.requests.append(Request(self.command, url.path, query, content_type, body, headers))
        fault = fake._fault_for(self.command, url.path)
        if fault is not None and fault.code == 0:
            fake._stopping.wait(fault.seconds)
            self.close_connection = True
            return
        log = logs.LOG_PATH.fullmatch(url.path) if self.command == "GET" else None
        try:
            if fault is not None:
                reason = fault.reason or REASONS.get(fault.code, "Unknown")
                raise ApiError(fault.code, reason, fault.message, fault.details)
            if log is not None:
                fake.authenticate(headers)
                self._send_log(*fake.pod_log(log["ns"], log["name"], query))
                return
            if self.command == "GET" and query.get("watch") in ("1", "true"):
                self._send_watch(fake.watch(url.path, query, headers))
                return
            code, payload = fake.handle(self.command, url.path, query, headers, body)
        except ApiError as exc:
            code, payload = exc.code, exc.status()
        except Exception as exc:  # a bug in the fake: answer 500 so the test sees it, not a dropped connection
            code, payload = 500, ApiError(500, "InternalError", f"fake API bug: {exc!r}").status()
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if code == 429:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(data)

    def _send_log(self, now: bytes, rest: Iterator[bytes] | None) -> None:
        """A log answer as the API server sends it: text, chunked (it may stay open while the log is followed)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._chunk(now)
            if rest is not None:
                for chunk in rest:
                    self._chunk(chunk)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):  # the client went away: stop following
            self.close_connection = True
        finally:
            if rest is not None:
                rest.close()

    def _send_watch(self, stream) -> None:
        """A watch: a chunked JSON answer, one event per line, until the watch ends (timeoutSeconds, an ERROR)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for line in stream:
                self._chunk(line)
            self.wfile.write(b"0\r\n\r\n")
        except watch.Dropped:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def wait_for(check, timeout: float = 5.0, interval: float = 0.01):
    """Poll `check` until it returns something truthy (test helper for threads)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not reached")
