"""The Backend interface for `kubernetes` clusters, through the official client (see the package docstring).

One instance per cluster and call site; the ApiClient and the discovered add-ons are created on first use.
Workload ids are the names of the top-level objects (Job, Volcano Job, Deployment, LeaderWorkerSet); the
console's names for them are at most 63 characters and the renderer shortens names over 48 characters
deterministically, so `status` and `cancel` accept either form.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from functools import cached_property
from urllib.parse import quote

from apps.backends.base import Backend, BackendError, NotFoundError, PermanentBackendError
from apps.backends.kubernetes import hypernodes as hypernode_view
from apps.backends.kubernetes import pods as podinfo
from apps.backends.kubernetes import quota as quota_push
from apps.backends.kubernetes import watch as inventory_watch
from apps.backends.kubernetes.api import KubeApi, collection_paused
from apps.backends.kubernetes.connection import api_client, connection_errors, timeout_of
from apps.backends.kubernetes.inventory import InventorySettings, gpu_holder, group_holders, group_pods, node_info
from apps.backends.kubernetes.nodes import DrainSettings, NodeOps, Progress
from apps.backends.kubernetes.resources import (
    COMPANION_KINDS,
    EVENT,
    KUEUE_WORKLOAD,
    NODE,
    POD,
    PRUNED_KINDS,
    ROUTED_KINDS,
    TRAINJOB,
    WARM_KINDS,
    WORKLOAD_KINDS,
    Kind,
    kind_of,
)
from apps.backends.kubernetes.sharing_setup import HAMI_NODE_ANNOTATION, setup_notes
from apps.backends.kubernetes.workloads import (
    event_lines,
    objects_for,
    quota_reserved_message,
    render_workload,
    usage_entries,
    waiting_for_kueue,
    workload_status,
)
from apps.backends.render.desired import DesiredState
from apps.backends.render.objects import MANAGED_BY, MANAGER, QUEUE_LABEL, TENANT_LABEL
from apps.backends.render.spec import Spec
from apps.backends.render.workload import RenderedWorkload, WorkloadContext
from apps.backends.render.workload.common import short_name
from apps.backends.render.workload.context import (
    target_errors,
    topology_label_errors,
    topology_scheduler_errors,
    volcano_tiers,
)
from apps.backends.render.workload.network import Fabric
from apps.backends.types import (
    BackendState,
    ConnectionReport,
    DrainResult,
    Inventory,
    LogSource,
    NodeInfo,
    PushResult,
    SubmitResult,
    Taint,
    UsageRecord,
    WorkloadLogs,
    WorkloadSpec,
    WorkloadStatus,
)
from apps.core.text import N_, Text

ADDON_GROUPS = {
    "kueue": ("kueue.x-k8s.io",),
    "volcano": ("batch.volcano.sh", "scheduling.volcano.sh"),
    "lws": ("leaderworkerset.x-k8s.io",),
    "keda": ("keda.sh",),
    "kserve": ("serving.kserve.io",),
    "trainer": ("trainer.kubeflow.org",),
}
ADDON_USE = {
    "kueue": "Kueue: queueing and quota for training jobs and services (queueing: kueue)",
    "volcano": "Volcano: gang scheduling and queues (queueing: volcano)",
    "lws": "LeaderWorkerSet: inference replicas that span nodes",
    "keda": "KEDA: autoscaling inference on the engines' queue length",
    "hami": "HAMi: fractional vGPUs (sharing mode hami)",
    "kserve": "KServe: inference services as InferenceServices (inference_target: kserve)",
    "trainer": "Kubeflow Trainer: training jobs as TrainJobs (training_target: trainjob)",
}
# Add-ons a connection test reports only when the cluster's targets use them (or they are installed).
TARGET_ADDONS = {"kserve": ("inference_target", "kserve"), "trainer": ("training_target", "trainjob")}
WORKLOAD_LABEL = "gpu-console/workload"
ROLE_LABEL = "gpu-console/role"
KIND_LABEL = "gpu-console/kind"
CONSOLE = f"{MANAGED_BY}={MANAGER}"
# The labels a TrainJob's pods are read with (see _trainjob_pods): whose they are, for status and metering.
CONSOLE_LABELS = (MANAGED_BY, TENANT_LABEL, QUEUE_LABEL, WORKLOAD_LABEL, KIND_LABEL)
SELECTOR_CHUNK = 50
# The pods that hold a node's GPUs: placed and not finished (the inventory's list, and its watch).
FINISHED_OUT = "status.phase!=Succeeded,status.phase!=Failed"
PLACED_PODS = f"spec.nodeName!=,{FINISHED_OUT}"
WATCH_RELIST_NODES = 200
TOUCHED_AT_ONCE = 4
# Where an inference service's engines answer /metrics without a cluster-wide `inference_metrics_url`: the
# Service the renderer creates for it, on the engines' port (one replica answers each scrape).
DEFAULT_METRICS_PATTERN = "http://{service}.{namespace}.svc:{port}/metrics"
KSERVE_SERVICE_PORT = 80


def _short(name: str) -> str:
    return short_name(name)


class KubernetesBackend(Backend):
    """A Kubernetes cluster through its API server."""

    kind = "kubernetes"
    renderer = "kubernetes"
    gpu_pools_from_inventory = True

    def __init__(self, cluster, *, sleep=None):
        super().__init__(cluster)
        self._sleep = sleep  # tests replace the drain's backoff sleep

    @classmethod
    def connection_errors(cls, connection: dict) -> list[str]:
        return (
            topology_label_errors(connection.get("topology_labels"))
            + target_errors(connection)
            + topology_scheduler_errors(connection)
            + connection_errors(connection)
        )

    @classmethod
    def fabric_errors(cls, fabric: Fabric, connection: dict) -> list[tuple[str, Text]]:
        """Besides the fabric's own checks: on a Kueue cluster its RDMA resource must be left out of quota
        (`kueue_excluded_resources`, mirroring Kueue's resources.excludeResourcePrefixes), or Kueue would never admit
        an RDMA pod: the console's ClusterQueues do not cover it."""
        problems = super().fabric_errors(fabric, connection)
        resource = fabric.rdma_resource
        excluded = connection.get("kueue_excluded_resources") or []
        if (
            not problems
            and resource
            and connection.get("queueing", "kueue") == "kueue"
            and not any(isinstance(p, str) and resource.startswith(p) for p in excluded)
        ):
            problems.append(
                (
                    "rdma_resource",
                    N_(
                        "this cluster's Kueue would never admit pods requesting %(resource)s (its ClusterQueues do "
                        "not cover it): its Kueue Configuration must list it, or a prefix such as %(prefix)s, in "
                        "resources.excludeResourcePrefixes, and the cluster's kueue_excluded_resources setting too",
                        resource=resource,
                        prefix=resource.split("/")[0] + "/",
                    ),
                )
            )
        return problems

    @cached_property
    def settings(self) -> dict:
        return dict(self.cluster.connection or {})

    @cached_property
    def api(self) -> KubeApi:
        return KubeApi(
            api_client(self.cluster),
            self.cluster.name,
            timeout_of(self.cluster),
            int(self.settings.get("page_size", 500)),
        )

    @cached_property
    def groups(self) -> set[str]:
        """API groups the server serves (discovery)."""
        answer = self.api.get("/apis", "discover API groups")
        return {group.get("name", "") for group in answer.get("groups") or []}

    @cached_property
    def addons(self) -> set[str]:
        return {addon for addon, groups in ADDON_GROUPS.items() if all(g in self.groups for g in groups)}

    def _served(self, kinds: list[Kind]) -> list[Kind]:
        return [k for k in kinds if not k.addon or k.addon in self.addons]

    @cached_property
    def node_ops(self) -> NodeOps:
        ops = NodeOps(self.api, drain_settings=DrainSettings.from_connection(self.settings))
        if self._sleep is not None:
            ops.sleep = self._sleep
        return ops

    # connection and inventory

    def test_connection(self) -> ConnectionReport:
        version = self.api.version()
        features = {
            addon: addon in self.addons
            for addon in ADDON_GROUPS
            if addon not in TARGET_ADDONS
            or addon in self.addons
            or self.settings.get(TARGET_ADDONS[addon][0]) == TARGET_ADDONS[addon][1]
        }
        nodes = self.api.request("GET", NODE.path(), "list nodes", query={"limit": 100})
        items = nodes.get("items") or []
        features["hami"] = any(HAMI_NODE_ANNOTATION in (n["metadata"].get("annotations") or {}) for n in items)
        queueing = self.settings.get("queueing", "kueue")
        notes = [f"missing {ADDON_USE[name]}" for name, present in features.items() if not present]
        if not features.get(queueing):
            notes.insert(
                0,
                f"this cluster's queueing is {queueing!r} but {queueing} is not installed: training jobs "
                "cannot be admitted until it is (or connection.queueing names the one installed)",
            )
        notes += setup_notes(items, self.settings)
        present = ", ".join(sorted(n for n, p in features.items() if p)) or "none"
        gpus = sum(int((n.get("status") or {}).get("capacity", {}).get("nvidia.com/gpu", 0) or 0) for n in items)
        more = "+" if nodes.get("metadata", {}).get("continue") else ""
        return ConnectionReport(
            ok=True,
            server_version=version,
            message=f"Kubernetes {version}; add-ons: {present}; {len(items)}{more} nodes, {gpus}{more} GPUs",
            features=features,
            notes=notes,
        )

    def now(self) -> datetime:
        """Kubernetes timestamps have whole seconds, and so has this clock: a span starting "now" must not look
        earlier than it, and metering's watermark (this clock at the call) must end where the spans it got
        end, or the fraction of a second between them would go unmetered."""
        return datetime.now(UTC).replace(microsecond=0)

    def inventory(self) -> Inventory:
        return self._listed_inventory()

    def _listed_inventory(self) -> Inventory:
        """Every node and its pods from two paged lists; the cursor holds the lists' resourceVersions."""
        taken_at = self.now()
        # Each page of pods is reduced to the GPUs its pods hold as it arrives, so the 20,000 pods of a big
        # cluster are never all in memory (nor traversed by every garbage collection while they are).
        holders, pods_rv = [], ""
        pages = contextlib.closing(self.api.pages_at(POD.path(), "list pods", fieldSelector=PLACED_PODS))
        with collection_paused():
            nodes, nodes_rv = self.api.list_at(NODE.path(), "list nodes")
            with pages as listed:
                for page, version in listed:
                    holders += [h for pod in page if (h := gpu_holder(pod)) is not None]
                    pods_rv = version
            by_node = group_holders(holders)
            settings = InventorySettings.from_connection(self.settings)
            infos = [node_info(node, by_node.get(node["metadata"]["name"]), settings) for node in nodes]
        self._hypernode_topology(infos)
        cursor = {"api": self._api_identity(), "nodes": nodes_rv, "pods": pods_rv, "listed_at": taken_at.timestamp()}
        if self._hypernodes is not None:
            cursor["hypernodes"] = self._hypernodes[1]  # a HyperNode change moves nodes: the next sync lists again
        return Inventory(nodes=infos, taken_at=taken_at, cursor=cursor if nodes_rv and pods_rv else None)

    @cached_property
    def _hypernodes(self) -> tuple[hypernode_view.HyperNodes, str] | None:
        """The cluster's HyperNodes and a fingerprint of them (each one's name and resourceVersion: a list's own
        resourceVersion moves with any write to the cluster), with topology_scheduler volcano-hypernodes on a
        cluster that serves them (None otherwise)."""
        if self.settings.get("topology_scheduler") != "volcano-hypernodes" or "topology.volcano.sh" not in self.groups:
            return None
        items = self.api.list(hypernode_view.GROUP_PATH, "list Volcano HyperNodes")
        return hypernode_view.HyperNodes(items), hypernode_view.fingerprint(items)

    def _hypernode_topology(self, infos: list[NodeInfo]) -> None:
        """With topology_scheduler volcano-hypernodes, each node's leaf switch and NVLink domain are the Volcano
        HyperNodes of those levels' tiers that contain it (hypernodes.py)."""
        if self._hypernodes is None:
            return
        view, _ = self._hypernodes
        tiers = volcano_tiers(self.settings)
        for info in infos:
            info.leaf_switch = view.domain(info.name, info.labels, tiers["leaf"])
            info.nvlink_domain = view.domain(info.name, info.labels, tiers["nvlink"])

    def _api_identity(self) -> str:
        return str(self.settings.get("api_url") or self.settings.get("kubeconfig") or "in-cluster")

    def inventory_since(self, cursor: dict | None) -> Inventory:
        """Only the nodes changed since `cursor`, from watch events (see watch.py); a full list on the first sync,
        after a 410 Gone, with `inventory_watch: false`, or every `inventory_relist_s` seconds."""
        settings = self.settings
        relist_s = float(settings.get("inventory_relist_s", 3600))
        usable = (
            settings.get("inventory_watch", True)
            and cursor
            and cursor.get("api") == self._api_identity()
            and cursor.get("nodes")
            and cursor.get("pods")
            and time.time() - float(cursor.get("listed_at") or 0) < relist_s
            and (self._hypernodes is None or cursor.get("hypernodes") == self._hypernodes[1])
        )
        if not usable:
            return self._listed_inventory()
        try:
            return self._watched_inventory(cursor)
        except inventory_watch.Expired:
            return self._listed_inventory()
        except BackendError as exc:
            if getattr(exc, "code", 0) != 403:
                raise
            # The account may list but not watch (an RBAC role from before the watch): list, as before.
            return self._listed_inventory()

    def _watched_inventory(self, cursor: dict) -> Inventory:
        taken_at = self.now()
        idle = float(self.settings.get("watch_idle_s", inventory_watch.DEFAULT_IDLE_S))
        with ThreadPoolExecutor(2) as pool:  # both watches wait out their quiet time at once
            nodes_job = pool.submit(
                inventory_watch.drain, self.api, NODE.path(), "watch nodes", cursor["nodes"], idle_s=idle
            )
            pods_job = pool.submit(
                inventory_watch.drain,
                self.api,
                POD.path(),
                "watch pods",
                cursor["pods"],
                idle_s=idle,
                fieldSelector=PLACED_PODS,
            )
            nodes, pods = nodes_job.result(), pods_job.result()
        latest: dict[str, dict | None] = {}  # node name -> its last object (None: deleted)
        for event in nodes.events:
            obj = event["object"]
            latest[obj["metadata"]["name"]] = None if event["type"] == "DELETED" else obj
        touched = set(latest)
        for event in pods.events:
            node_name = (event["object"].get("spec") or {}).get("nodeName")
            if node_name:
                touched.add(node_name)
        if len(touched) > int(self.settings.get("watch_relist_nodes", WATCH_RELIST_NODES)):
            return self._listed_inventory()  # so many changed nodes: one list is cheaper than a list per node
        settings = InventorySettings.from_connection(self.settings)

        def recompute(name: str) -> NodeInfo | None:
            node = latest[name] if name in latest else self.api.get_or_none(NODE.path(name), f"read node {name}")
            if node is None:
                return None
            on_node = self.api.list(
                POD.path(), f"list the pods on node {name}", fieldSelector=f"spec.nodeName={name},{FINISHED_OUT}"
            )
            return node_info(node, group_pods(on_node).get(name), settings)

        infos, removed = [], []
        # A few touched nodes at a time: their requests are small and each mostly waits for the API server.
        with ThreadPoolExecutor(TOUCHED_AT_ONCE) as pool:
            for name, info in zip(sorted(touched), pool.map(recompute, sorted(touched)), strict=True):
                if info is None:
                    removed.append(name)
                else:
                    infos.append(info)
        self._hypernode_topology(infos)
        next_cursor = {**cursor, "nodes": nodes.resource_version, "pods": pods.resource_version}
        return Inventory(nodes=infos, taken_at=taken_at, complete=False, removed=removed, cursor=next_cursor)

    # workloads

    def render(self, spec: Spec, context: WorkloadContext) -> RenderedWorkload:
        return render_workload(spec, context, self.settings)

    def submit(self, spec: WorkloadSpec) -> SubmitResult:
        objects = objects_for(spec, self.settings, self.cluster.name, self.schema_version)
        top = next((o for o in objects if kind_of(o) in WORKLOAD_KINDS), None)
        if top is None:
            raise PermanentBackendError(f"{spec.name}: no Job, Deployment or LeaderWorkerSet among its objects")
        # The object's own add-on, and the queueing system its labels name (without Kueue a suspended Job
        # would wait forever, and a service would run outside every quota).
        queueing = self.settings.get("queueing", "kueue")
        for missing in (kind_of(top).addon, queueing):
            if missing and missing not in self.addons:
                raise PermanentBackendError(
                    f"cluster {self.cluster.name}: {spec.name} needs {ADDON_USE[missing].split(':')[0]}, which is "
                    "not installed"
                )
        name = top["metadata"]["name"]
        top_path = kind_of(top).path(name, top["metadata"].get("namespace", ""))
        existing = self.api.get_or_none(top_path, f"read {quota_push.label(top)}")
        if existing is not None:
            # Idempotent by name, and never re-applied: Kueue owns spec.suspend once it admits a Job, and a
            # forced apply of the rendered `suspend: true` would take a running job back off its nodes.
            status = self.status([name])[name]
            return SubmitResult(backend_id=name, state=status.state, reason=status.reason or "already submitted")
        applied = None
        for obj in objects:
            answer = self.api.apply(
                obj,
                kind_of(obj).path(obj["metadata"]["name"], obj["metadata"].get("namespace", "")),
                f"apply {quota_push.label(obj)}",
            )
            if obj is top:
                applied = answer
        status = workload_status(name, applied or top, [], [])
        return SubmitResult(backend_id=name, state=status.state, reason=status.reason)

    def _workload_objects(self, names: set[str]) -> dict[str, dict]:
        """Top-level workload objects by name: a field selector per name for a few, else the console's list."""
        found: dict[str, dict] = {}
        for kind in self._served(WORKLOAD_KINDS):
            if len(names) <= 3:
                items = [
                    item
                    for name in sorted(names)
                    for item in self.api.list(
                        kind.path(), f"find {kind.kind} {name}", fieldSelector=f"metadata.name={name}"
                    )
                ]
            else:
                items = self.api.list(kind.path(), f"list {kind.plural}", labelSelector=CONSOLE)
            for item in items:
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind.kind)
                if item["metadata"]["name"] in names:
                    found[item["metadata"]["name"]] = item
        return found

    def _pods_of(self, objects: list[dict]) -> dict[str, list[dict]]:
        """Pods by owning workload name, found by the workloads' console label (in chunks of ids); a TrainJob's
        pods, which do not carry its labels, by their JobSet's name."""
        ids = sorted({(o["metadata"].get("labels") or {}).get(WORKLOAD_LABEL, "") for o in objects} - {""})
        names = {o["metadata"]["name"] for o in objects}
        out: dict[str, list[dict]] = {}
        out.update(self._trainjob_pods([o for o in objects if o.get("kind") == "TrainJob"]))
        for start in range(0, len(ids), SELECTOR_CHUNK):
            chunk = ",".join(ids[start : start + SELECTOR_CHUNK])
            for pod in self.api.list(POD.path(), "list workload pods", labelSelector=f"{WORKLOAD_LABEL} in ({chunk})"):
                owner = podinfo.owner_name(pod)
                if owner in names:
                    out.setdefault(owner, []).append(pod)
        return out

    def _trainjob_pods(self, trainjobs: list[dict]) -> dict[str, list[dict]]:
        """A TrainJob's pods by its name. Its labels reach its JobSet and Jobs, not its pods, so they are found by the
        JobSet's label (the JobSet is named after the TrainJob) and given the TrainJob's console labels here, so that
        status, cancellation and metering read them as any workload's pods (tenant, queue, workload id)."""
        by_name = {(t["metadata"].get("namespace", ""), t["metadata"]["name"]): t for t in trainjobs}
        names = sorted({name for _, name in by_name})
        out: dict[str, list[dict]] = {}
        for start in range(0, len(names), SELECTOR_CHUNK):
            chunk = ",".join(names[start : start + SELECTOR_CHUNK])
            for pod in self.api.list(
                POD.path(), "list TrainJob pods", labelSelector=f"{podinfo.JOBSET_LABEL} in ({chunk})"
            ):
                meta = pod["metadata"]
                owner = by_name.get((meta.get("namespace", ""), podinfo.owner_name(pod)))
                if owner is None:
                    continue
                console = {k: v for k, v in (owner["metadata"].get("labels") or {}).items() if k in CONSOLE_LABELS}
                meta["labels"] = {**console, **(meta.get("labels") or {})}
                out.setdefault(owner["metadata"]["name"], []).append(pod)
        return out

    def _events_of(self, objects: list[dict], pods: dict[str, list[dict]]) -> dict[str, list[str]]:
        """Warning events of each workload and its pods, one list call per namespace."""
        out: dict[str, list[str]] = {}
        for ns in sorted({o["metadata"].get("namespace", "") for o in objects}):
            events = self.api.list(EVENT.path(namespace=ns), f"list events in {ns}", fieldSelector="type=Warning")
            for obj in objects:
                if obj["metadata"].get("namespace", "") != ns:
                    continue
                name = obj["metadata"]["name"]
                involved = {name} | {p["metadata"]["name"] for p in pods.get(name, [])}
                mine = [e for e in events if (e.get("involvedObject") or {}).get("name") in involved]
                out[name] = event_lines(mine)
        return out

    def _kueue_waits(self, objects: list[dict], pods: dict[str, list[dict]]) -> dict[str, str]:
        """Why Kueue has not admitted each waiting workload: its Kueue Workload's QuotaReserved=False message
        ("LocalQueue x doesn't exist", "couldn't assign flavors ..."), one list call per namespace that has one.

        Kueue keeps that reason on its Workload object, owned by the Job, by each pod of a Deployment or by the
        LeaderWorkerSet (https://kueue.sigs.k8s.io/docs/concepts/workload/), not on the Job or its pods.
        """
        if "kueue" not in self.addons:
            return {}
        waiting = [o for o in objects if waiting_for_kueue(o, pods.get(o["metadata"]["name"], []))]
        out: dict[str, str] = {}
        for ns in sorted({o["metadata"].get("namespace", "") for o in waiting}):
            reasons: dict[str, str] = {}
            for wl in self.api.list(KUEUE_WORKLOAD.path(namespace=ns), f"list Kueue workloads in {ns}"):
                message = quota_reserved_message(wl)
                for ref in wl["metadata"].get("ownerReferences") or []:
                    if message:
                        reasons.setdefault(ref.get("name", ""), message)
            for obj in waiting:
                if obj["metadata"].get("namespace", "") != ns:
                    continue
                name = obj["metadata"]["name"]
                owners = [name, *sorted(p["metadata"]["name"] for p in pods.get(name, []))]
                message = next((reasons[o] for o in owners if o in reasons), "")
                if message:
                    out[name] = message
        return out

    def status(self, backend_ids: list[str]) -> dict[str, WorkloadStatus]:
        from apps.backends.kubernetes.models import KubeCancellation

        names = {backend_id: _short(backend_id) for backend_id in backend_ids}
        found = self._workload_objects(set(names.values())) if names else {}
        objects = list(found.values())
        pods = self._pods_of(objects)
        events = self._events_of(objects, pods)
        waits = self._kueue_waits(objects, pods)
        cancelled = dict(
            KubeCancellation.objects.filter(cluster=self.cluster, backend_id__in=list(names.values())).values_list(
                "backend_id", "cancelled_at"
            )
        )
        out = {}
        for backend_id, name in names.items():
            obj = found.get(name)
            if obj is not None:
                out[backend_id] = replace(
                    workload_status(name, obj, pods.get(name, []), events.get(name, []), waits.get(name, "")),
                    backend_id=backend_id,
                )
            elif name in cancelled:
                out[backend_id] = WorkloadStatus(
                    backend_id, BackendState.CANCELLED, "cancelled by the console", finished_at=cancelled[name]
                )
            else:
                out[backend_id] = WorkloadStatus(backend_id, BackendState.UNKNOWN, "not on the cluster")
        return out

    def cancel(self, backend_id: str) -> WorkloadStatus:
        from apps.backends.kubernetes.models import KubeCancellation

        name = _short(backend_id)
        obj = self._workload_objects({name}).get(name)
        if obj is None:
            done = KubeCancellation.objects.filter(cluster=self.cluster, backend_id=name).first()
            if done is None:
                raise NotFoundError(f"cluster {self.cluster.name}: no workload {backend_id!r}")
            return WorkloadStatus(
                backend_id, BackendState.CANCELLED, "cancelled by the console", finished_at=done.cancelled_at
            )
        pods = self._pods_of([obj]).get(name, [])
        current = workload_status(backend_id, obj, pods, [])
        if current.state.finished:
            return current
        now = self.now()
        KubeCancellation.objects.update_or_create(
            cluster=self.cluster,
            backend_id=name,
            defaults={"cancelled_at": now, "usage": usage_entries(pods, now)},
        )
        ns = obj["metadata"].get("namespace", "")
        workload = (obj["metadata"].get("labels") or {}).get(WORKLOAD_LABEL)
        if workload:
            # A routed service's engine Deployment selects its pods by role too (its router's pods share the workload
            # label): then its router, prefill pool and the router's account and Role go with it.
            routed = ROLE_LABEL in ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels", {})
            # A service's warm-weights Job goes too (a training Job is the top object itself: skipped below).
            serving = (obj["metadata"].get("labels") or {}).get(KIND_LABEL) == "inference"
            kinds = COMPANION_KINDS + (ROUTED_KINDS if routed else []) + (WARM_KINDS if serving else [])
            for kind in self._served(kinds):
                for item in self.api.list(
                    kind.path(namespace=ns),
                    f"list {kind.plural} of {name}",
                    labelSelector=f"{WORKLOAD_LABEL}={workload}",
                ):
                    if kind in WORKLOAD_KINDS and item["metadata"]["name"] == name:
                        continue  # the top object: deleted last, in the foreground
                    self._delete(kind, item["metadata"]["name"], ns, "Background")
        self._delete(kind_of(obj), name, ns, "Foreground")
        return WorkloadStatus(backend_id, BackendState.CANCELLED, "deleted: its pods are stopping", finished_at=now)

    def stream_logs(
        self, source: LogSource, *, tail: int, follow: bool, worker: int | None, until: float | None = None
    ) -> Iterator[str]:
        """Its pods' logs through the API server (apps/backends/kubernetes/logs.py)."""
        from apps.backends.kubernetes.logs import PodLogs

        trainjobs = self.settings.get("training_target") == "trainjob"
        return PodLogs(self.api, source, trainjobs=trainjobs).stream(
            tail=tail, follow=follow, worker=worker, until=until
        )

    def _delete(self, kind: Kind, name: str, ns: str, propagation: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        with contextlib.suppress(NotFoundError):  # already gone: what cancel wants
            self.api.request("DELETE", kind.path(name, ns), f"delete {kind.kind} {ns}/{name}", body=body)

    # node operations

    def cordon(self, node: str, reason: str = "", *, by: str = "gpu-console") -> None:
        self.node_ops.cordon(node, reason, by)

    def uncordon(self, node: str) -> None:
        self.node_ops.uncordon(node)

    def drain(
        self, node: str, reason: str = "", *, by: str = "gpu-console", progress: Progress | None = None
    ) -> DrainResult:
        return self.node_ops.drain(node, reason, by, progress)

    def resume(self, node: str) -> None:
        self.node_ops.uncordon(node)

    def taint(self, node: str, taint: Taint) -> None:
        self.node_ops.taint(node, taint)

    def untaint(self, node: str, key: str) -> None:
        self.node_ops.untaint(node, key)

    # quota

    @cached_property
    def schema_version(self) -> str:
        """The Kubernetes version whose schemas pre-flight validation uses: the server's, within those known."""
        from apps.backends.render.validate import K8S_VERSIONS

        parts = self.api.version().lstrip("v").split(".")
        try:
            minor = int(parts[1].rstrip("+"))
        except (IndexError, ValueError):
            return K8S_VERSIONS[-1]
        known = [int(v.split(".")[1]) for v in K8S_VERSIONS]
        return f"1.{min(max(minor, known[0]), known[-1])}"

    def quota_objects(self, state: DesiredState, *, validate: bool = True) -> tuple[list[dict], list[str]]:
        """The quota objects of `state` (the tenancy desired state of this cluster) and the caveats of rendering it.

        `validate` checks them strictly against the server's Kubernetes version before anything is sent (a
        few seconds for hundreds of queues); the read-only drift report skips it.
        """
        from apps.backends.render import RenderError, render_kubernetes
        from apps.backends.render.validate import ManifestError, check_objects

        try:
            rendered = render_kubernetes(state)
            if validate:
                check_objects(rendered.objects, (self.schema_version,))
        except (RenderError, ManifestError) as exc:
            raise PermanentBackendError(
                f"cluster {self.cluster.name}: the quota objects cannot be rendered: {exc}"
            ) from exc
        return rendered.objects, rendered.caveats

    def quota_plan(self, state: DesiredState) -> list[quota_push.Change]:
        """What a push of `state` would change on the cluster (server-side dry run), changing nothing."""
        objects, _ = self.quota_objects(state)
        return quota_push.plan(self.api, objects, self._served(PRUNED_KINDS))

    def push_quota(self, state: DesiredState) -> PushResult:
        objects, messages = self.quota_objects(state)
        changes, applied = quota_push.push(self.api, objects, self._served(PRUNED_KINDS))
        lines = [c.describe() for c in changes if c.action != "unchanged"]
        return PushResult(applied=applied, unchanged=len(changes) - applied, messages=lines + messages)

    def quota_drift(self, state: DesiredState) -> quota_push.DriftReport:
        """What the cluster holds under the console's label against the objects of `state`."""
        objects, _ = self.quota_objects(state, validate=False)
        return quota_push.drift(self.api, objects, self.addons)

    # usage

    def usage_since(self, since: datetime) -> list[UsageRecord]:
        from apps.backends.kubernetes.models import KubeCancellation

        now = self.now()
        entries = []
        cancelled = set()
        for row in KubeCancellation.objects.filter(cluster=self.cluster, cancelled_at__gt=since):
            cancelled.add(row.backend_id)
            entries += row.usage
        pods = self.api.list(POD.path(), "list the console's pods", labelSelector=CONSOLE)
        if TRAINJOB in self._served(WORKLOAD_KINDS):
            trainjobs = self.api.list(TRAINJOB.path(), "list the console's TrainJobs", labelSelector=CONSOLE)
            pods += [pod for found in self._trainjob_pods(trainjobs).values() for pod in found]
        pods = [p for p in pods if podinfo.owner_name(p) not in cancelled]
        entries += usage_entries(pods, now)
        records = []
        for entry in entries:
            # Spans are in the API server's clock; only a running pod's end is ours (now).
            start = max(datetime.fromisoformat(entry["start"]), since)
            end = datetime.fromisoformat(entry["end"])
            if end <= start:
                continue
            records.append(
                UsageRecord(
                    backend_id=entry["backend_id"],
                    tenant=entry["tenant"],
                    queue=entry["queue"],
                    gpu_model=entry["gpu_model"],
                    gpu_fraction=entry["gpus"],
                    start=start,
                    end=end,
                )
            )
        return records

    # What the console asks besides the scheduler calls

    namespaced = True

    def workload_logs(self, name: str, workload_id: str, namespace: str = "") -> WorkloadLogs:
        selector = f"{WORKLOAD_LABEL}={workload_id}"
        argv = ["kubectl", "logs", "-n", namespace, "-l", selector, "--all-containers", "--prefix", "--tail=200"]
        return WorkloadLogs(command=shlex.join(argv))

    def service_metrics_url(self, name: str, values: dict[str, str]) -> str:
        if self.settings.get("inference_target") == "kserve":
            # KServe's own predictor Service (RawDeployment mode), on its port 80 in front of the engine's port.
            values = {**values, "service": f"{_short(name)}-predictor", "port": str(KSERVE_SERVICE_PORT)}
        return DEFAULT_METRICS_PATTERN.format(**{key: quote(value, safe="") for key, value in values.items()})
