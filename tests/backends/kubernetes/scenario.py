"""One pass through everything the Kubernetes backend does, for tests that inspect its requests."""

from __future__ import annotations

from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.render.spec import Disaggregation, InferenceServiceSpec, Pool
from apps.backends.render.workload import RenderContext, render_kubernetes
from apps.backends.types import LogSource, Taint, WorkloadSpec
from apps.fleet.models import GpuModel
from apps.tenancy.desired_state import build_desired_state
from apps.tenancy.models import Quota
from tests.backends.console_specs import console_spec
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.conftest import bind_queue, make_cluster, seed_nodes


def run_everything(fake: FakeKubernetes, queueing: str = "kueue", name: str = "everything") -> KubernetesBackend:
    """Connection, inventory (listed and watched, with Volcano's HyperNodes), quota plan / push / drift (with
    Kueue's Topologies), submit, status, cordon, taints, drain, cancel, a routed service's submit and cancel,
    usage."""
    seed_nodes(fake, count=2, gpus=4)  # the stock device plugin's nvidia.com/gpu, with Volcano too
    # Each cluster's own topology scheduler, so the inventory reads Volcano's HyperNodes and the push renders Kueue's
    # Topologies (the requests the RBAC manifest must grant).
    scheduler = {"kueue": "kueue-tas", "volcano": "volcano-hypernodes"}[queueing]
    cluster = make_cluster(fake, name=name, queueing=queueing, drain_grace_period_s=10, topology_scheduler=scheduler)
    queue = bind_queue(cluster, "team-a", "train", ["team-a-train"])
    backend = KubernetesBackend(cluster, sleep=lambda seconds: None)
    backend.test_connection()
    backend.inventory()
    backend.inventory_since(backend.inventory_since(None).cursor)  # a list with resourceVersions, then the watches
    Quota.objects.create(queue=queue, gpu_model=GpuModel.objects.get(code="h100"), guaranteed=8, borrow_limit=4)
    state = build_desired_state(cluster)
    backend.quota_plan(state)
    backend.push_quota(state)
    backend.quota_drift(state)
    spec = console_spec("train-1", gpus_per_worker=2, workers=2, command=["sleep", "600"], namespace="team-a-train")
    backend.submit(spec)
    fake.advance(5)
    backend.status(["train-1", "missing-1"])
    source = LogSource(name="train-1", workload_id="train-1", workers=2, namespace="team-a-train")
    list(backend.stream_logs(source, tail=10, follow=False, worker=None))
    backend.cordon("gpu-02", "maintenance")
    backend.taint("gpu-02", Taint("gpu-console/maintenance", "yes", "NoSchedule"))
    backend.untaint("gpu-02", "gpu-console/maintenance")
    backend.uncordon("gpu-02")
    node = backend.status(["train-1"])["train-1"].placements[0].node
    backend.drain(node, "contract")
    backend.resume(node)
    fake.advance(60)
    backend.cancel("train-1")
    _routed_service(backend, queueing)
    backend.usage_since(fake.now().replace(year=2000))
    return backend


def _routed_service(backend: KubernetesBackend, queueing: str) -> None:
    """A service with its router and prefill/decode pools, submitted and cancelled: the router's account and Role
    are applied and deleted too."""
    spec = InferenceServiceSpec(
        name="pd",
        tenant="team-a",
        queue="train",
        model="Qwen/Qwen2.5-7B-Instruct",
        gpu_model="h100",
        engine="sglang",
        routing="cache-aware",
        disaggregation=Disaggregation(prefill=Pool(1), decode=Pool(1), transfer_backend="mooncake"),
    )
    ctx = RenderContext(
        namespace="team-a-train",
        queue_name="team-a-train",
        priority_class="online-inference",
        queueing=queueing,
        workload_id="77",
        product_label="NVIDIA-H100-80GB-HBM3",
        name="wl77-pd",
    )
    backend.submit(WorkloadSpec("wl77-pd", "team-a", "train", manifest=render_kubernetes(spec, ctx)))
    backend.cancel("wl77-pd")
