"""Journeys through the control-plane model: a modelled 12-node GPU cluster, the console's quota desired state
pushed to it, and workloads submitted through the console's API (the outbox submits them, reconcile reads them
back), to see whether what the console renders would run, where, and why not.

The fleet (node names say where they are):

- h100-a1..a4 (leaf switch a) and h100-b1..b2 (leaf b): 8 x H100 each, pool h100;
- a100-01: 8 x A100, pool a100; a100-mig-01: A100s in MIG (mixed strategy: 4 whole GPUs and 28 x 1g.10gb);
  a100-hami-01: 8 x A100 shared by HAMi (10 vGPUs each);
- l40s-01..02: 8 x L40S, tainted for inference (`gpu-console/pool=l40s-inference:NoSchedule`);
- l40s-ts-01: 4 x L40S time-sliced, 4 replicas each (GFD: `NVIDIA-L40S-SHARED`).

Tenant "a" has queue "train" (namespace a-train) and queue "serve" (a-serve) with quota on H100, A100 and L40S.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.backends.registry import get_backend
from apps.fleet.models import GpuModel
from apps.fleet.services import create_cluster, sync_inventory
from apps.tenancy import services as tenancy
from apps.tenancy.desired_state import build_desired_state
from apps.workloads import services
from apps.workloads.models import Workload
from tests.backends.k8s_fake import FakeKubernetes
from tests.utils.personas import fresh

A100 = "NVIDIA-A100-SXM4-80GB"
L40S = "NVIDIA-L40S"
DEFAULT_LEAF = "gpu-console/leaf-switch"
POOL = "gpu-console/pool"
INFERENCE_TAINT = {"key": "gpu-console/pool", "value": "l40s-inference", "effect": "NoSchedule"}
H100_NODES = ["h100-a1", "h100-a2", "h100-a3", "h100-a4", "h100-b1", "h100-b2"]
QUOTA = {"h100": 48, "a100": 24, "l40s": 24}


def seed_fleet(fake: FakeKubernetes, leaf_label: str = DEFAULT_LEAF, gpu_resource: str = "nvidia.com/gpu") -> None:
    """The 12 nodes, as the NVIDIA device plugin / GFD (and HAMi's plugin) present them."""
    big = {"cpu": "224", "memory": "2048Gi"}
    for name in H100_NODES:
        leaf = "leaf-a" if "-a" in name else "leaf-b"
        labels = {leaf_label: leaf, POOL: "h100", "nvidia.com/gpu.clique": f"nvl-{name}"}
        fake.add_node(name, gpus=8, labels=labels, resource=gpu_resource, **big)
    fake.add_node("a100-01", gpus=8, product=A100, memory_mib=81920, labels={POOL: "a100"}, **big)
    fake.add_node(
        "a100-mig-01", gpus=4, product=A100, memory_mib=81920, mig={"1g.10gb": 28}, labels={POOL: "a100-mig"}, **big
    )
    fake.add_node(
        "a100-hami-01", gpus=8, product=A100, memory_mib=81920, hami_split=10, labels={POOL: "a100-hami"}, **big
    )
    for name in ("l40s-01", "l40s-02"):
        fake.add_node(
            name,
            gpus=8,
            product=L40S,
            memory_mib=46068,
            labels={POOL: "l40s-inference"},
            taints=[INFERENCE_TAINT],
            **big,
        )
    fake.add_node(
        "l40s-ts-01", gpus=4, product=L40S, memory_mib=46068, time_slicing=4, labels={POOL: "l40s-shared"}, **big
    )


def seed_volcano_vgpu(fake: FakeKubernetes, name: str, *, gpus: int, split: int, memory_mib: int) -> None:
    """Volcano's vGPU device plugin on node `name`: it advertises volcano.sh/vgpu-number (vGPUs, GPUs x split),
    volcano.sh/vgpu-memory (MiB) and volcano.sh/vgpu-cores (100 per GPU), which Volcano's deviceshare plugin
    schedules (https://github.com/Project-HAMi/volcano-vgpu-device-plugin, Volcano's vGPU user guide)."""
    node = fake.get("", "v1", "nodes", name)
    extra = {
        "volcano.sh/vgpu-number": str(gpus * split),
        "volcano.sh/vgpu-memory": str(gpus * memory_mib),
        "volcano.sh/vgpu-cores": str(gpus * 100),
    }
    node["status"]["capacity"].update(extra)
    node["status"]["allocatable"].update(extra)
    with fake.lock:
        fake.store.put(fake.resource("", "v1", "nodes"), node)


def seed_hypernodes(fake: FakeKubernetes) -> None:
    """Volcano's view of the network (https://volcano.sh/en/docs/network_topology_aware_scheduling/): tier 1 the
    NVLink domains (one per H100 node here), tier 2 the leaf switches, as the console's default tiers expect."""
    for name in H100_NODES:
        fake.add_hypernode(f"nvl-{name}", 1, nodes=[name])
    for leaf in ("a", "b"):
        fake.add_hypernode(f"leaf-{leaf}", 2, hypernodes=[f"nvl-{n}" for n in H100_NODES if f"-{leaf}" in n])


@dataclass
class Journey:
    fake: FakeKubernetes
    cluster: object
    personas: object
    api: object
    capture: object
    submitted: list[Workload] = field(default_factory=list)

    def post(self, kind: str, spec: dict):
        with self.capture(execute=True):
            return self.api(fresh(self.personas.member_a)).post(
                "/api/v1/workloads/", {"kind": kind, "spec": spec}, format="json"
            )

    def submit(self, kind: str, spec: dict) -> Workload:
        response = self.post(kind, spec)
        assert response.status_code == 201, response.json()
        workload = Workload.objects.get(pk=response.json()["id"])
        self.submitted.append(workload)
        return workload

    def refused(self, kind: str, spec: dict) -> dict:
        response = self.post(kind, spec)
        assert response.status_code == 400, (response.status_code, response.json())
        return response.json()

    def settle(self, seconds: float = 5) -> None:
        """Let fake time pass and reconcile the console's workloads with the cluster."""
        self.fake.advance(seconds)
        services.reconcile_workloads()

    def state(self, workload: Workload) -> Workload:
        workload.refresh_from_db()
        return workload

    def why(self, workload: Workload) -> str:
        """What the cluster says about a workload that is not where a test wants it: the console's reason, and
        the Kueue Workload / Volcano PodGroup / pod conditions and events behind it."""
        lines = [f"console: {workload.state}: {workload.state_reason}"]
        name = workload.backend_name
        for wl in self.fake.objects("kueue.x-k8s.io", "v1beta2", "workloads"):
            if name in wl["metadata"]["name"]:
                lines += [
                    f"kueue {wl['metadata']['name']}: {c['type']}={c['status']} {c.get('message', '')}"
                    for c in wl["status"].get("conditions", [])
                ]
        for pg in self.fake.objects("scheduling.volcano.sh", "v1beta1", "podgroups"):
            if name in pg["metadata"]["name"]:
                lines += [f"podgroup {pg['metadata']['name']}: {pg['status']}"]
        for pod in self.fake.objects("", "v1", "pods"):
            if pod["metadata"]["name"].startswith(name):
                lines += [
                    f"pod {pod['metadata']['name']} on {pod['spec'].get('nodeName')}: {pod['status'].get('conditions')}"
                ]
        lines += [
            f"event {e['involvedObject']['name']}: {e['reason']} {e['message']}"
            for e in self.fake.objects("", "v1", "events")
            if e["involvedObject"]["name"].startswith(name) and e["type"] == "Warning"
        ]
        return "\n".join(lines)

    def wait(self, workload: Workload, states: set[str], seconds: float = 120, step: float = 5) -> Workload:
        waited = 0.0
        while True:
            workload = self.state(workload)
            if workload.state in states:
                return workload
            if waited >= seconds:
                raise AssertionError(f"{workload.name} never reached {sorted(states)}:\n{self.why(workload)}")
            self.settle(step)
            waited += step

    def pods(self, workload: Workload) -> list[dict]:
        return sorted(
            (
                p
                for p in self.fake.objects("", "v1", "pods")
                if (p["metadata"].get("labels") or {}).get("gpu-console/workload") == str(workload.pk)
                and not p["metadata"].get("deletionTimestamp")
            ),
            key=lambda p: p["metadata"]["name"],
        )

    def nodes(self, workload: Workload) -> list[str]:
        return sorted(p["spec"].get("nodeName") or "-" for p in self.pods(workload))

    def node(self, name: str) -> dict:
        return self.fake.get("", "v1", "nodes", name)


def start(personas, fake, api, capture, *, queueing: str, **connection) -> Journey:
    """The console set up on the modelled cluster: inventory synced, tenant a's queues and quota pushed."""
    admin = fresh(personas.platform_admin)
    cluster = create_cluster(
        admin, name="gpu-prod", kind="kubernetes", connection={"api_url": fake.url, "queueing": queueing, **connection}
    )
    assert sync_inventory(cluster.pk).ok
    queues = {name: tenancy.create_queue(admin, tenant=personas.a, name=name) for name in ("train", "serve")}
    for code, gpus in QUOTA.items():
        model = GpuModel.objects.get(code=code)
        tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=model, guaranteed=2 * gpus)
        for queue in queues.values():
            tenancy.set_quota(admin, queue=queue, gpu_model=model, guaranteed=gpus)
    for name, queue in queues.items():
        tenancy.bind_queue(admin, queue, cluster=cluster, namespaces=[f"a-{name}"])
    get_backend(cluster).push_quota(build_desired_state(cluster))
    return Journey(fake, cluster, personas, api, capture)


def training(name: str, **fields) -> dict:
    spec = {
        "name": name,
        "tenant": "a",
        "queue": "train",
        "tier": "training",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["sleep", "300"],
        "workers": 1,
        "gpus_per_worker": 1,
        "gpu_model": "h100",
        "max_runtime_s": 3600,
        "retries": 0,
    }
    spec.update(fields)
    return spec


def inference(name: str, **fields) -> dict:
    spec = {
        "name": name,
        "tenant": "a",
        "queue": "serve",
        "engine": "vllm",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
    }
    spec.update(fields)
    return spec
