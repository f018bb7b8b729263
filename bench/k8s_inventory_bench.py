"""Kubernetes backend benchmarks for issue 6, against the fake API server over real HTTP.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_bench .venv/bin/python bench/k8s_inventory_bench.py

Measures:
  1. listing 1,280 nodes and 20,000 pods through the official client, paged (limit 500): with the client's
     model deserialisation (what `CoreV1Api.list_*` returns by default: the baseline) and as raw JSON;
  2. the backend's `inventory()` (paged JSON lists + mapping into NodeInfo / GpuInfo);
  3. `apps.fleet.services.sync_inventory` end to end: first sync into PostgreSQL, then an unchanged resync;
  4. `drain()` of a node with 8 evictable pods (cordon, list the node's pods, 8 policy/v1 evictions);
  5. inventory by watch (issue 23 part 6), each round in the same run as its floor: the first sync (lists with
     resourceVersion, then the cluster's cursor stored) against the raw JSON lists; a resync with 1 % of the nodes
     changed (half relabelled, half with a pod finished), read from watch events, against a full-list resync
     (`inventory_watch: false`) of the same fleet; an unchanged resync by watch.
For 1-3 and 5 the fake runs in a child process (as a real API server is another process) serving static objects
(its control plane off); it shares the machine's 2 cores with the console's process and PostgreSQL, and
its Python JSON encoding is slower than a real API server's. Medians of BENCH_REPEAT runs (default 5;
drains 10; the model-deserialising baseline BENCH_MODEL_REPEAT, default 1: it takes 30 to 70 s a run).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/console_bench")
# The fake API listens on loopback, which the outbound policy refuses unless the deployment allows it.
os.environ.setdefault("OUTBOUND_ALLOWED_NETWORKS", "127.0.0.0/8")

import django  # noqa: E402

django.setup()

from bench.fleet_bench import ensure_database, median_ms  # noqa: E402

NODES = int(os.environ.get("BENCH_NODES", "1280"))
PODS = int(os.environ.get("BENCH_PODS", "20000"))
GPUS = 8
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
MODEL_REPEAT = int(os.environ.get("BENCH_MODEL_REPEAT", "1"))
CHANGED = max(1, NODES // 100)  # 1 % of the nodes change between two syncs
ONLY = os.environ.get("BENCH_ONLY", "")  # "watch": only the inventory-by-watch rounds
PRODUCTS = [("NVIDIA-H100-80GB-HBM3", 81559), ("NVIDIA-A100-SXM4-80GB", 81920), ("NVIDIA-L40S", 46068)]


def pod(i: int, node: str, gpus: int) -> dict:
    """A pod about the size of a real training or service pod (labels, env, probes, resources): ~2.5 kB."""
    ns = f"team-{i % 100:02d}"
    labels = {
        "app.kubernetes.io/managed-by": "gpu-console",
        "gpu-console/tenant": ns,
        "gpu-console/queue": "train",
        "gpu-console/workload": str(i // 4),
        "job-name": f"wl{i // 4}-train",
        "batch.kubernetes.io/job-name": f"wl{i // 4}-train",
    }
    requests = {"cpu": "8", "memory": "64Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {
        "metadata": {"name": f"wl{i // 4}-train-{i % 4}-{i:05x}", "namespace": ns, "labels": labels},
        "spec": {
            "nodeName": node,
            "priorityClassName": "training",
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                    "command": [
                        "torchrun",
                        "--nnodes=4",
                        "--nproc-per-node=8",
                        "--rdzv-backend=c10d",
                        "--",
                        "python",
                        "train.py",
                    ],
                    "env": [{"name": f"VAR_{k}", "value": "x" * 40} for k in range(8)],
                    "resources": {"requests": requests, "limits": {"memory": "64Gi", **requests}},
                    "volumeMounts": [
                        {"name": "dshm", "mountPath": "/dev/shm"},  # noqa: S108 - a pod's mount point,
                        {"name": "data-0", "mountPath": "/data"},
                    ],
                }
            ],
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                {"name": "data-0", "persistentVolumeClaim": {"claimName": "datasets"}},
            ],
        },
        "status": {"phase": "Running", "startTime": "2026-11-30T10:00:00Z", "hostIP": "10.0.0.1", "podIP": "10.1.0.1"},
    }


def seed(fake) -> None:
    for i in range(NODES):
        product, memory = PRODUCTS[i % len(PRODUCTS)]
        fake.add_node(
            f"gpu-{i:04d}",
            gpus=GPUS,
            product=product,
            memory_mib=memory,
            labels={
                "gpu-console/pool": product.lower()[7:11],
                "gpu-console/rack": f"r{i // 32:02d}",
                "gpu-console/leaf-switch": f"leaf-{i // 64:02d}",
                "nvidia.com/gpu.clique": f"nvl-{i // 8:03d}",
            },
            taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        )
    for n in range(100):
        fake.add_namespace(f"team-{n:02d}")
    gpu_pods = NODES * GPUS // 2  # half the GPUs busy, one per pod; the rest of the pods hold none
    with fake.lock:
        resource = fake.resource("", "v1", "pods")
        for i in range(PODS):
            node = f"gpu-{i % NODES:04d}"
            body = pod(i, node, 1 if i < gpu_pods else 0)
            created = fake.store.create(resource, body["metadata"]["namespace"], body)
            created["status"] = body["status"]


def change(fake, round_: int) -> int:
    """1 % of the nodes change: half get a new label, the other half lose a running GPU pod (it finishes)."""
    nodes, pods = fake.resource("", "v1", "nodes"), fake.resource("", "v1", "pods")
    with fake.lock:
        picked = [f"gpu-{(round_ * 97 + k * 31) % NODES:04d}" for k in range(CHANGED)]
        by_node: dict[str, list[dict]] = {}
        for (_ns, _name), obj in fake.store.bucket(pods).items():
            holds = "nvidia.com/gpu" in obj["spec"]["containers"][0]["resources"]["requests"]
            if holds and obj["spec"].get("nodeName") in picked[CHANGED // 2 :] and obj["status"]["phase"] == "Running":
                by_node.setdefault(obj["spec"]["nodeName"], []).append(obj)
        for i, name in enumerate(picked):
            if i < CHANGED // 2 or not by_node.get(name):
                node = fake.store.get(nodes, "", name)
                node["metadata"]["labels"]["bench/round"] = str(round_)
                fake.store.put(nodes, node)
            else:
                pod = by_node[name][0]
                pod["status"]["phase"] = "Succeeded"
                fake.store.put(pods, pod)
    return len(picked)


def serve(pipe) -> None:
    """Child process: seed the fake, send its URL, serve and change nodes when told, until told to stop."""
    from tests.backends.k8s_fake import FakeKubernetes

    fake = FakeKubernetes(control_plane=False)
    fake.record = False  # 40 MB of request log is not what is measured
    seed(fake)
    fake.compact()  # the seeding's history is not needed: watches start from the lists
    fake.start()
    pipe.send(fake.url)
    while (command := pipe.recv()) != "stop":
        pipe.send(change(fake, command))
    fake.stop()


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def client_lists(client, deserialize: bool) -> int:
    """Every node and pod through the typed CoreV1Api, 500 per page."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(client)
    count = 0
    for lister in (core.list_node, core.list_pod_for_all_namespaces):
        token = None
        while True:
            if deserialize:
                page = lister(limit=500, _continue=token)
                count += len(page.items)
                token = page.metadata._continue
            else:
                import json

                raw = json.loads(lister(limit=500, _continue=token, _preload_content=False).data)
                count += len(raw["items"])
                token = raw["metadata"].get("continue")
            if not token:
                break
    return count


def watch_rounds(pipe, cluster, backend) -> list[tuple[str, float]]:
    """Inventory by watch, each round with its floor measured just before: (name, median ms) rows."""
    from apps.fleet.models import Cluster, Node
    from apps.fleet.services import sync_inventory

    listing = {**cluster.connection, "inventory_watch": False}
    watching = {**cluster.connection, "inventory_watch": True}
    raw, first, full, delta, quiet = [], [], [], [], []
    for round_ in range(REPEAT):
        raw.append(timed(lambda: client_lists(backend.api.client, False))[0])
        Node.objects.filter(cluster=cluster).delete()
        Cluster.objects.filter(pk=cluster.pk).update(connection=watching, inventory_cursor={}, sync_started_at=None)
        elapsed, result = timed(lambda: sync_inventory(cluster.pk))
        assert result.ok and result.added == NODES, result
        first.append(elapsed)
        # The floor of a resync: the same fleet listed in full, nothing changed (the cursor set aside).
        Cluster.objects.filter(pk=cluster.pk).update(connection=listing)
        elapsed, result = timed(lambda: sync_inventory(cluster.pk))
        assert result.ok and result.unchanged == NODES, result
        full.append(elapsed)
        Cluster.objects.filter(pk=cluster.pk).update(connection=watching)
        pipe.send(round_ * 2 + 1)
        changed = pipe.recv()
        elapsed, result = timed(lambda: sync_inventory(cluster.pk))
        assert result.ok and result.updated == changed and result.nodes == NODES, result
        delta.append(elapsed)
        elapsed, result = timed(lambda: sync_inventory(cluster.pk))
        assert result.ok and result.updated == 0, result
        quiet.append(elapsed)
    raw_ms, first_ms, full_ms, delta_ms = (median_ms(x) for x in (raw, first, full, delta))
    per_round = sorted(f / r for f, r in zip(first, raw, strict=True))
    shares = sorted(d / f for d, f in zip(delta, full, strict=True))
    print(
        f"per round: first / raw lists {[round(x, 2) for x in per_round]}, "
        f"1 % resync / full list {[f'{x:.1%}' for x in shares]}"
    )
    print(
        f"watch rounds (ms): raw {[round(x * 1000) for x in raw]}, first {[round(x * 1000) for x in first]}, "
        f"full resync {[round(x * 1000) for x in full]}, 1 % changed {[round(x * 1000) for x in delta]}, "
        f"unchanged {[round(x * 1000) for x in quiet]}"
    )
    return [
        ("watch: floor, raw JSON lists (same rounds)", raw_ms),
        (f"watch: first sync (lists + cursor), {first_ms / raw_ms:.2f} x the raw lists (target <= 1.5)", first_ms),
        ("watch: floor, resync by full list (inventory_watch false), nothing changed", full_ms),
        (
            f"watch: resync by watch, {CHANGED} nodes (1 %) changed, {delta_ms / full_ms:.1%} of a full list "
            "(target <= 10 %)",
            delta_ms,
        ),
        ("watch: resync by watch, nothing changed", median_ms(quiet)),
    ]


def main() -> None:
    from apps.backends.kubernetes.backend import KubernetesBackend
    from apps.fleet.models import Cluster
    from apps.fleet.services import sync_inventory
    from tests.backends.k8s_fake import FakeKubernetes

    ensure_database()
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=serve, args=(child,), daemon=True)
    server.start()
    url = parent.recv()
    print(f"fake API with {NODES} nodes and {PODS} pods at {url} (pid {server.pid})")
    Cluster.objects.filter(name="k8s-bench").delete()
    cluster = Cluster.objects.create(
        name="k8s-bench", kind="kubernetes", connection={"api_url": url, "request_timeout_s": 60}
    )
    backend = KubernetesBackend(cluster)
    rows = []
    if ONLY == "watch":  # issue 23 part 6 alone: the watch rounds with their floors
        rows += watch_rounds(parent, cluster, backend)
        parent.send("stop")
        server.join(10)
        report(rows)
        return

    samples = [timed(lambda: client_lists(backend.api.client, True))[0] for _ in range(MODEL_REPEAT)]
    rows.append(("baseline: CoreV1Api lists with model deserialisation (nodes + pods)", median_ms(samples)))
    samples = [timed(lambda: client_lists(backend.api.client, False))[0] for _ in range(REPEAT)]
    rows.append(("CoreV1Api lists, raw JSON (_preload_content=False)", median_ms(samples)))
    samples = []
    for _ in range(REPEAT):
        elapsed, inventory = timed(backend.inventory)
        samples.append(elapsed)
    busy = sum(1 for n in inventory.nodes for g in n.gpus if g.allocated_to)
    rows.append((f"backend inventory() ({len(inventory.nodes)} nodes, {busy} GPUs allocated)", median_ms(samples)))

    first = []
    again = []
    Cluster.objects.filter(pk=cluster.pk).update(connection={**cluster.connection, "inventory_watch": False})
    for _ in range(REPEAT):
        Cluster.objects.filter(pk=cluster.pk).update(sync_started_at=None)
        from apps.fleet.models import Node

        Node.objects.filter(cluster=cluster).delete()
        elapsed, result = timed(lambda: sync_inventory(cluster.pk))
        assert result.ok and result.added == NODES, result
        first.append(elapsed)
        elapsed, result = timed(lambda: sync_inventory(cluster.pk))
        assert result.ok and result.unchanged == NODES, result
        again.append(elapsed)
    rows.append(("sync_inventory, first sync into PostgreSQL", median_ms(first)))
    rows.append(("sync_inventory, unchanged resync", median_ms(again)))
    rows += watch_rounds(parent, cluster, backend)
    parent.send("stop")
    server.join(10)

    # Drain: a fresh small fake with its control plane on (evictions delete pods as a kubelet would).
    drains = []
    for _ in range(max(REPEAT, 10)):
        small = FakeKubernetes().start()
        small.add_node("gpu-0001", gpus=8)
        small.add_namespace("team-a")
        for i in range(8):
            small.add_pod(f"train-{i}", "team-a", "gpu-0001", gpus=1, labels={"job-name": f"train-{i}"})
        drainer = KubernetesBackend(Cluster(name="k8s-drain", kind="kubernetes", connection={"api_url": small.url}))
        elapsed, result = timed(lambda b=drainer: b.drain("gpu-0001", "bench"))
        assert len(result.evicted) == 8 and not result.blocked, result
        drains.append(elapsed)
        small.stop()
    rows.append(("drain of a node with 8 evictable pods (cordon + list + 8 evictions)", median_ms(drains)))

    report(rows)


def report(rows: list[tuple[str, float]]) -> None:
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>10,.1f} ms")


if __name__ == "__main__":
    main()
