"""Demo data: a platform admin, two organizations with teams, and one user per persona.

Everything goes through the services, so the demo's audit log shows how the console records work.
Re-running is safe: existing rows are kept and passwords are reset to the one printed.
"""

from __future__ import annotations

from apps.accounts import services as accounts
from apps.accounts.models import Membership, Tenant, User
from apps.accounts.roles import Role
from apps.backends.render.spec import DEFAULT_IMAGES
from apps.tenancy import services as tenancy

TENANTS = [
    # slug, name, parent slug, description
    ("acme", "Acme AI", None, "An organization with two GPU teams."),
    ("acme-llm", "LLM team", "acme", "Pre-training and serving large language models."),
    ("acme-vision", "Vision team", "acme", "Image and video models."),
    ("lab", "Research Lab", None, "A university lab sharing the fleet."),
    ("lab-rl", "RL group", "lab", "Reinforcement learning experiments."),
]

PEOPLE = [
    # username, role, tenant slug (None: console-wide), what they show
    ("alice", Role.TENANT_ADMIN, "acme", "team admin of Acme AI and its teams"),
    ("bob", Role.MEMBER, "acme-llm", "member of the LLM team"),
    ("carol", Role.MEMBER, "lab-rl", "member of the RL group (another tenant)"),
    ("dave", Role.ONCALL, None, "on-call engineer"),
    ("erin", Role.VIEWER, "acme", "read-only viewer of Acme AI"),
]


def seed_demo(admin_username: str, password: str) -> list[tuple[str, str]]:
    """Create or refresh the demo; returns (username, what they show) for the printed login table."""
    admin = accounts.bootstrap_platform_admin(username=admin_username, password=password)
    for slug, name, parent_slug, description in TENANTS:
        if not Tenant.objects.filter(slug=slug).exists():
            parent = Tenant.objects.get(slug=parent_slug) if parent_slug else None
            tenancy.create_tenant(admin, name=name, slug=slug, parent=parent, description=description)
    logins = [(admin_username, "platform admin")]
    for username, role, tenant_slug, what in PEOPLE:
        user = User.objects.filter(username=username).first()
        if user is None:
            user = accounts.create_user(
                admin, username=username, password=password, email=f"{username}@example.com", reason="demo user"
            )
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        tenant = Tenant.objects.get(slug=tenant_slug) if tenant_slug else None
        if not Membership.objects.filter(user=user, tenant=tenant).exists() and not (
            tenant is None and Membership.objects.filter(user=user, tenant=None, role=role).exists()
        ):
            accounts.grant_membership(admin, user=user, tenant=tenant, role=role, reason="demo persona")
        logins.append((username, what))
    if not User.objects.filter(username="ci-llm").exists():
        accounts.create_service_account(
            admin,
            username="ci-llm",
            tenant=Tenant.objects.get(slug="acme-llm"),
            role=Role.MEMBER,
            reason="demo CI pipeline",
        )
    seed_fleet(admin)
    return logins


DEMO_CLUSTER = "sim-a"
DEMO_SHAPE = {"nodes": 32, "gpus_per_node": 8, "models": {"h100": 0.5, "a100": 0.25, "l40s": 0.25}, "seed": 42}
# The demo cluster's Kubernetes twin keeps gangs on one leaf with Kueue's Topology Aware Scheduling, over the
# simulator's own topology labels: its rendering shows the Topology's pod-set annotations (docs/targets.md). The
# simulator itself places by its own model.
DEMO_TOPOLOGY = {
    "topology_scheduler": "kueue-tas",
    "topology_labels": {"rack": "topology.simulator/rack", "leaf": "topology.simulator/leaf-switch"},
}
# A second simulated cluster that renders services as KServe InferenceServices and training as Kubeflow Trainer
# TrainJobs (docs/targets.md): its workloads' pages show what such a cluster receives.
TARGETS_CLUSTER = "sim-b"
TARGETS_SHAPE = {"nodes": 8, "gpus_per_node": 8, "models": {"h100": 0.5, "a100": 0.5}, "seed": 7}
TARGETS = {"inference_target": "kserve", "training_target": "trainjob"}
# The H100 pool keeps SGLang's image pulled (docs/inference.md: warm starts): chat-8b, an SGLang service, starts
# without a pull there, while llm-serve-70b (vLLM, not pre-pulled, 140 GB of weights) starts cold.
PREPULL = {"h100-training": [DEFAULT_IMAGES["sglang"]]}
PREPULL_MINUTES = 5  # the simulated nodes pull an 11 GB image in under four (apps/backends/simulator/coldstart.py)


def seed_fleet(admin) -> None:
    """Two simulated clusters with some work on them, synced once so the pages show them at once: sim-a, 32 × 8 GPUs,
    whose H100 pool pre-pulls an engine image, and sim-b, 8 × 8 GPUs, rendering for KServe and Kubeflow Trainer."""
    from apps.fleet.models import Cluster
    from apps.fleet.services import create_simulated_cluster, sync_inventory, update_cluster

    cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first()
    if cluster is None:
        cluster = create_simulated_cluster(
            admin, DEMO_CLUSTER, DEMO_SHAPE, description="The demo's simulated fleet: 32 nodes × 8 GPUs."
        )
    if "topology_scheduler" not in (cluster.connection or {}):
        update_cluster(admin, cluster, connection={**cluster.connection, **DEMO_TOPOLOGY}, reason="demo: Kueue TAS")
    sync_inventory(cluster.pk)
    targets = Cluster.objects.filter(name=TARGETS_CLUSTER).first()
    if targets is None:
        targets = create_simulated_cluster(
            admin,
            TARGETS_CLUSTER,
            TARGETS_SHAPE,
            description="8 nodes × 8 GPUs whose services are KServe InferenceServices and training TrainJobs.",
        )
        update_cluster(
            admin, targets, connection={**targets.connection, **TARGETS}, reason="demo: KServe and Kubeflow Trainer"
        )
    sync_inventory(targets.pk)
    seed_fabric(admin, cluster)
    seed_prepull(admin, cluster)
    seed_quotas(admin, cluster, targets)
    seed_health(admin)
    from apps.chargeback.demo import seed_chargeback

    seed_chargeback(admin)  # rates, spend budgets, last month's spend replayed and its period closed


def seed_prepull(admin, cluster) -> None:
    """The pools' pre-pull lists, pushed to the cluster, and its clock moved on until the pulls are done (as if the
    platform team had set them up before the services were deployed). Only the first time."""
    from apps.backends.registry import get_backend
    from apps.fleet.models import NodePool
    from apps.fleet.services import set_pool_prepull
    from apps.operations.runner import execute_operation
    from apps.operations.services import start_operation

    pools = {pool.name: pool for pool in NodePool.objects.filter(cluster=cluster, name__in=PREPULL)}
    if not pools or any(pool.prepull_images for pool in pools.values()):
        return
    for name, images in PREPULL.items():
        set_pool_prepull(admin, pools[name], images, reason="demo: engine images kept on the H100 nodes")
    push = start_operation(
        admin,
        "tenancy.quota-push",
        target=cluster,
        params={"cluster_id": cluster.pk, "dry_run": False},
        reason="demo: push the pre-pull lists",
    )
    execute_operation(push.pk)  # now, before the services are submitted (the worker finds it done)
    get_backend(cluster).simulation().advance(
        admin, PREPULL_MINUTES, reason="demo: the nodes pull the pre-pulled images"
    )


DEMO_FABRIC = {
    "fabric": "infiniband",
    "rdma_resource": "rdma/ib",
    "nccl_ib_hca": "mlx5",
    "nccl_socket_ifname": "=eth0",
}


def seed_fabric(admin, cluster) -> None:
    """The simulated HGX H100 nodes carry InfiniBand (they advertise rdma/ib): the H100 pool declares it, so the
    demo's multi-node H100 pre-training runs over RDMA (docs/networking.md). A100 pools keep no declared fabric."""
    from apps.fleet.models import NodePool
    from apps.fleet.services import update_pool_fabric

    pool = NodePool.objects.filter(cluster=cluster, name="h100-training").first()
    if pool is not None and pool.fabric == "none":
        update_pool_fabric(admin, pool, reason="demo: the HGX H100 nodes' InfiniBand", **DEMO_FABRIC)


def seed_health(admin) -> None:
    """On-call (dave) gets health notifications by e-mail; the demo's mail backend prints them to the console."""
    from apps.health.services.config import add_channel
    from apps.notifications.models import NotificationChannel

    if not NotificationChannel.objects.exists():
        add_channel(admin, kind="email", target="dave@example.com", reason="demo on-call")


# (tenant, queue, namespace, {model: (guaranteed, borrow_limit, lend_limit)})
DEMO_QUEUES = [
    ("acme-llm", "train", "acme-llm-train", {"h100": (24, 16, None)}),
    ("acme-llm", "serve", "acme-llm-serve", {"h100": (8, 0, 0)}),
    ("acme-vision", "train", "acme-vision-train", {"a100": (16, 8, None), "l40s": (8, 0, None)}),
    ("lab-rl", "default", "lab-rl", {"h100": (8, 0, None), "a100": (16, 8, None), "l40s": (8, 8, None)}),
]
DEMO_GUARANTEE_CAPS = [
    ("acme", "h100", 32),
    ("acme", "a100", 16),
    ("acme", "l40s", 8),
    ("lab", "h100", 8),
    ("lab", "a100", 16),
    ("lab", "l40s", 8),
]
# Work submitted through the console as the demo users: (user, kind, spec).
_TRAIN = {"image": "nvcr.io/nvidia/pytorch:24.08-py3", "command": ["torchrun", "train.py"], "tier": "training"}
DEMO_WORKLOADS = [
    (
        "bob",
        "training",
        {
            **_TRAIN,
            "name": "llm-pretrain-70b",
            "tenant": "acme-llm",
            "queue": "train",
            "workers": 4,
            "gpus_per_worker": 8,
            "gpu_model": "h100",
            "topology": "leaf",
            "max_runtime_s": 8 * 3600,
        },
    ),
    (
        "bob",
        "inference",
        {
            "name": "llm-serve-70b",
            "tenant": "acme-llm",
            "queue": "serve",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "gpu_model": "h100",
            "tensor_parallel": 4,
            "replicas": 1,
        },
    ),
    # Autoscaled on SGLang's waiting queue: its page shows replicas following the queue through bursts.
    (
        "bob",
        "inference",
        {
            "name": "chat-8b",
            "tenant": "acme-llm",
            "queue": "serve",
            "engine": "sglang",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu_model": "h100",
            "tensor_parallel": 1,
            "replicas": 1,
            "autoscaling": {"enabled": True, "min_replicas": 1, "max_replicas": 4, "waiting_threshold": 5},
        },
    ),
    # Cache-aware routing with prefill/decode pools (docs/inference.md): its page shows the router and each pool.
    (
        "bob",
        "inference",
        {
            "name": "chat-pd",
            "tenant": "acme-llm",
            "queue": "serve",
            "engine": "sglang",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "gpu_model": "h100",
            "tensor_parallel": 1,
            "routing": "cache-aware",
            "disaggregation": {"prefill": {"replicas": 1}, "decode": {"replicas": 2}},
        },
    ),
    (
        "alice",
        "training",
        {
            **_TRAIN,
            "name": "vision-detector",
            "tenant": "acme-vision",
            "queue": "train",
            "workers": 2,
            "gpus_per_worker": 8,
            "gpu_model": "a100",
            "max_runtime_s": 5 * 3600,
            # The simulator hangs its run 15 minutes in (a stuck all-reduce): the hung-job rule finds it 10 later.
            "env": {"SIM_HANG_AFTER_S": "900"},
        },
    ),
    (
        "alice",
        "training",
        {
            **_TRAIN,
            "name": "vision-eval",
            "tenant": "acme-vision",
            "queue": "train",
            "tier": "periodic",
            "workers": 1,
            "gpus_per_worker": 4,
            "gpu_model": "l40s",
            "max_runtime_s": 2 * 3600,
        },
    ),
    (
        "carol",
        "training",
        {
            **_TRAIN,
            "name": "rl-ppo-sweep",
            "tenant": "lab-rl",
            "queue": "default",
            "tier": "exploratory",
            "env": {"SIM_IDLE_PHASE_S": "300"},  # five minutes of loading first: idle, never called hung
            "workers": 3,
            "gpus_per_worker": 2,
            "gpu_model": "a100",
            "max_runtime_s": 4 * 3600,
        },
    ),
    # Policy evaluations as MPS clients: four replicas of 1/4 of one L40S each, one GPU of quota in all, run at once
    # under one MPS server (the simulator runs the GPU in exclusive-process mode; its exporter shows no pod on it).
    (
        "carol",
        "training",
        {
            **_TRAIN,
            "name": "rl-eval-mps",
            "tenant": "lab-rl",
            "queue": "default",
            "tier": "exploratory",
            "workers": 4,
            "gpus_per_worker": 1,
            "gpu_model": "l40s",
            "sharing": {"mode": "mps", "replicas": 4},
            "max_runtime_s": 2 * 3600,
        },
    ),
    (
        "bob",
        "training",
        {
            **_TRAIN,
            "name": "llm-sft-8b",
            "tenant": "acme-llm",
            "queue": "train",
            "workers": 1,
            "gpus_per_worker": 8,
            "gpu_model": "h100",
            "max_runtime_s": 3 * 3600,
        },
    ),
    # On sim-b (docs/targets.md): a vLLM service rendered as a KServe InferenceService, training as a TrainJob.
    (
        "carol",
        "inference",
        {
            "name": "rl-reward-model",
            "tenant": "lab-rl",
            "queue": "default",
            "cluster": TARGETS_CLUSTER,
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "gpu_model": "h100",
            "tensor_parallel": 1,
            "replicas": 1,
        },
    ),
    (
        "carol",
        "training",
        {
            **_TRAIN,
            "name": "rl-trainjob",
            "tenant": "lab-rl",
            "queue": "default",
            "cluster": TARGETS_CLUSTER,
            "tier": "exploratory",
            "workers": 2,
            "gpus_per_worker": 4,
            "gpu_model": "a100",
            "max_runtime_s": 3 * 3600,
        },
    ),
]


def seed_quotas(admin, cluster, targets=None) -> None:
    """Guarantee caps, queues with quotas bound to the demo cluster (the RL group's on `targets` too), claims with
    reasons, and a quota request."""
    from apps.fleet.models import GpuModel
    from apps.tenancy import services as quota
    from apps.tenancy.models import Queue, QuotaRequest

    if Queue.objects.exists():
        return
    models = {m.code: m for m in GpuModel.objects.all()}
    for slug, code, amount in DEMO_GUARANTEE_CAPS:
        quota.set_guarantee_cap(admin, tenant=Tenant.objects.get(slug=slug), gpu_model=models[code], guaranteed=amount)
    queues = {}
    for slug, name, namespace, _rows in DEMO_QUEUES:
        queue = quota.create_queue(admin, tenant=Tenant.objects.get(slug=slug), name=name)
        quota.bind_queue(admin, queue, cluster=cluster, namespaces=[namespace])
        queues[(slug, name)] = queue
    if targets is not None:
        quota.bind_queue(admin, queues[("lab-rl", "default")], cluster=targets, namespaces=["lab-rl-b"])
    # Guarantees first, then borrow limits: a borrow limit needs other queues to borrow from.
    for with_borrowing in (False, True):
        for slug, name, _, rows in DEMO_QUEUES:
            for code, (guaranteed, borrow, lend) in rows.items():
                quota.set_quota(
                    admin,
                    queue=queues[(slug, name)],
                    gpu_model=models[code],
                    guaranteed=guaranteed,
                    borrow_limit=borrow if with_borrowing else 0,
                    lend_limit=lend,
                )
    from apps.workloads.services import save_template, submit_workload

    for username, kind, spec in DEMO_WORKLOADS:
        submit_workload(
            User.objects.get(username=username), kind=kind, spec=spec, idempotency_key=f"demo-{spec['name']}"
        )
    template = {key: value for key, value in DEMO_WORKLOADS[0][2].items() if key not in {"name", "tenant"}}
    save_template(
        User.objects.get(username="alice"),
        tenant=Tenant.objects.get(slug="acme-llm"),
        name="4x8 H100 pretrain",
        kind="training",
        spec={**template, "name": "pretrain"},
        description="Four nodes of eight H100s in one leaf switch",
    )
    if not QuotaRequest.objects.exists():
        alice = User.objects.get(username="alice")
        quota.request_quota(
            alice,
            queue=queues[("acme-llm", "train")],
            gpu_model=models["h100"],
            guaranteed=32,
            justification="The 70B pre-training run needs 32 H100s without borrowing.",
        )
    from apps.observability.demo import seed_wait_history

    seed_wait_history(cluster)  # a day of finished work, so the wait-time charts have history
