"""The Backend interface over the simulation engine: what a `simulated` cluster answers.

Each method is one `Engine.open()` block (lock, load, tick, act, save). Times the simulator reports
(inventory `taken_at`, workload start/finish, usage spans) are simulated time.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from django.urls import reverse
from django.utils import timezone

from apps.backends.base import Backend
from apps.backends.render.desired import DesiredState
from apps.backends.render.spec import Spec
from apps.backends.render.workload import RenderedWorkload, WorkloadContext, kubernetes_context, render_kubernetes
from apps.backends.render.workload.context import target_errors, topology_label_errors, topology_scheduler_errors
from apps.backends.render.workload.network import network_plan
from apps.backends.simulator import history, reports
from apps.backends.simulator.controls import Simulation
from apps.backends.simulator.engine import Engine
from apps.backends.simulator.logs import NCCL_LABEL, SimulatedLog
from apps.backends.simulator.models import SimCluster
from apps.backends.types import (
    ConnectionReport,
    DrainResult,
    Inventory,
    LogSource,
    MetricsAnswer,
    PushResult,
    SubmitResult,
    Taint,
    UsageRecord,
    UtilizationSpan,
    WorkloadLogs,
    WorkloadSpec,
    WorkloadStatus,
)

VERSION = "gpu-console simulator 1"


def nccl_label(spec: WorkloadSpec) -> dict[str, str]:
    """What the run's NCCL says it uses, from the spec and its pool's fabric (render/workload/network.py), as the
    simulated log prints it: {} where the workload's ranks do not talk between nodes."""
    plan = network_plan(spec.source, spec.context.fabric)
    if not plan.transport:
        return {}
    settings = ", ".join(f"{name}={value}" for name, value in plan.env.items())
    network = "IB" if plan.transport == "rdma" else "Socket"
    return {NCCL_LABEL: f"Using network {network} ({settings})"}


class SimulatorBackend(Backend):
    """A seeded, in-database GPU fleet that behaves like a scheduler (see apps/backends/simulator/engine.py)."""

    kind = "simulated"
    renderer = "kubernetes"

    @classmethod
    def connection_errors(cls, connection: dict) -> list[str]:
        """It renders as a Kubernetes cluster with these settings: its deployment targets and topology settings
        must be valid too."""
        return (
            topology_label_errors(connection.get("topology_labels"))
            + target_errors(connection)
            + topology_scheduler_errors(connection)
        )

    def test_connection(self) -> ConnectionReport:
        with Engine.open(self.cluster) as engine:
            running = sum(1 for w in engine.workloads.values() if w.state == "running")
            pending = sum(1 for w in engine.workloads.values() if w.state == "pending")
            return ConnectionReport(
                ok=True,
                server_version=VERSION,
                message=(
                    f"simulated fleet: {engine.shape.describe()}; simulated time "
                    f"{engine.now.isoformat(timespec='seconds')}; {running} running, {pending} pending"
                ),
                features={"gang": True, "mig": True, "time-slicing": True, "mps": True, "hami": True, "topology": True},
                notes=["times are simulated: real time plus the offset `simulate advance` adds"],
            )

    def inventory(self) -> Inventory:
        with Engine.open(self.cluster) as engine:
            return reports.inventory(engine)

    def render(self, spec: Spec, context: WorkloadContext) -> RenderedWorkload:
        """What a Kubernetes cluster with this cluster's settings would run (the simulator itself runs the
        WorkloadSpec's summary and renders nothing when it submits)."""
        # The simulated fleet runs every sharing mode: its Kubernetes twin has HAMi's device plugin on the nodes
        # HAMi's install guide labels (gpu=on) and Volcano's vGPU plugin, unless the cluster's settings say otherwise.
        settings = {"hami_node_labels": {"gpu": "on"}, "volcano_vgpu": True, **(self.cluster.connection or {})}
        # Its Kueue leaves the RDMA resource a pool declares out of quota, as a site running RDMA with Kueue does.
        fabric = context.fabric
        if fabric is not None and fabric.rdma_resource:
            excluded = settings.get("kueue_excluded_resources") or []
            settings["kueue_excluded_resources"] = [*excluded, fabric.rdma_resource]
        return render_kubernetes(spec, kubernetes_context(context, settings))

    def submit(self, spec: WorkloadSpec) -> SubmitResult:
        if spec.source is not None and spec.context is not None:
            spec.labels = {**spec.labels, **nccl_label(spec)}
        with Engine.open(self.cluster) as engine:
            return engine.submit(spec)

    def status(self, backend_ids: list[str]) -> dict[str, WorkloadStatus]:
        with Engine.open(self.cluster) as engine:
            return reports.statuses(engine, list(backend_ids))

    def cancel(self, backend_id: str) -> WorkloadStatus:
        with Engine.open(self.cluster) as engine:
            return reports.workload_status(engine, engine.cancel(backend_id))

    def stream_logs(
        self, source: LogSource, *, tail: int, follow: bool, worker: int | None, until: float | None = None
    ) -> Iterator[str]:
        """The simulated run and what its program prints (apps/backends/simulator/logs.py)."""
        log = SimulatedLog(self.cluster, source, worker)
        if not follow:
            return log.read(tail)
        return log.follow(tail, until, finish=lambda: self.status([source.name]))

    def cordon(self, node: str, reason: str = "") -> None:
        with Engine.open(self.cluster) as engine:
            engine.cordon(node, reason)

    def uncordon(self, node: str) -> None:
        with Engine.open(self.cluster) as engine:
            engine.uncordon(node)

    def drain(self, node: str, reason: str = "") -> DrainResult:
        with Engine.open(self.cluster) as engine:
            return engine.drain(node, reason)

    def resume(self, node: str) -> None:
        with Engine.open(self.cluster) as engine:
            engine.resume(node)

    def taint(self, node: str, taint: Taint) -> None:
        with Engine.open(self.cluster) as engine:
            engine.taint(node, taint)

    def untaint(self, node: str, key: str) -> None:
        with Engine.open(self.cluster) as engine:
            engine.untaint(node, key)

    def push_quota(self, state: DesiredState) -> PushResult:
        rows = {
            f"{q.tenant}/{q.name}/{line.gpu_model}": {
                "guaranteed": line.guaranteed,
                "borrow_limit": line.borrow_limit,
                "lend_limit": line.lend_limit,
                "weight": line.weight,
            }
            for q in state.queues
            for line in q.quotas
        }
        pools = {pool.name: list(pool.images) for pool in state.prepull if pool.images}
        with Engine.open(self.cluster) as engine:
            applied, unchanged = engine.push_quotas(rows)
            pulls = engine.push_prepulls(pools)
        messages = [f"stored {len(rows)} quota rows"]
        if pools or pulls:
            images = sum(len(images) for images in pools.values())
            messages.append(f"{len(pools)} pools pre-pull {images} images ({pulls} pools changed)")
        return PushResult(applied=applied + pulls, unchanged=unchanged, messages=messages)

    def usage_since(self, since: datetime) -> list[UsageRecord]:
        with Engine.open(self.cluster) as engine:
            return reports.usage_since(engine, since)

    # What the console asks besides the scheduler calls

    def now(self) -> datetime:
        simulation = SimCluster.objects.filter(cluster=self.cluster).first()
        return simulation.sim_now() if simulation is not None else timezone.now()

    def workload_logs(self, name: str, workload_id: str, namespace: str = "") -> WorkloadLogs:
        return WorkloadLogs(lines=history.workload_log(self.cluster, name))

    telemetry_in_process = True

    def node_metrics(self, nodes: list[str]) -> dict[str, MetricsAnswer]:
        """Every node's exporter text from one load of the simulation (one short lock)."""
        from apps.backends.simulator.exporter import scrape_many

        return scrape_many(self.cluster, nodes)

    def service_metrics(self, name: str) -> MetricsAnswer:
        """The same answer GET /simulator/<cluster>/services/<name>/metrics gives, without HTTP."""
        from apps.backends.simulator.exporter import scrape_service

        return scrape_service(self.cluster.name, name)

    def gpu_utilization(
        self, gpus: dict[str, tuple[str, int]], start: datetime, end: datetime
    ) -> dict[str, list[UtilizationSpan]]:
        return history.gpu_utilization(self.cluster, gpus, start, end)

    def service_metrics_url(self, name: str, values: dict[str, str]) -> str:
        return reverse("simulator:service_metrics", args=[self.cluster.name, name])

    def stack_dump(self, namespace: str, pod: str, node: str, job: str) -> str | None:
        """What py-spy would print for the pod's main process (apps/backends/simulator/history.py)."""
        return history.stack_dump(self.cluster, namespace, pod, node, job)

    simulation_class = Simulation

    # Simulator-only operations (the services and the demo use these).

    def advance(self, seconds: float) -> None:
        with Engine.open(self.cluster) as engine:
            engine.advance(seconds)

    # Telemetry (not part of the Backend interface: real clusters are scraped at their exporters' URLs)

    def node_metrics_text(self, node: str) -> str:
        """The node's dcgm-exporter text, as its HTTP endpoint would answer; 503/404 become backend errors."""
        from apps.backends.base import NotFoundError, RetryableBackendError
        from apps.backends.simulator.exporter import scrape

        answer = scrape(self.cluster.name, node)
        if answer.status == 404:
            raise NotFoundError(answer.body.strip())
        if answer.status != 200:
            raise RetryableBackendError(f"exporter on {node} answered {answer.status}: {answer.body.strip()}")
        return answer.body

    def service_metrics_text(self, name: str) -> str:
        """A service's engines' /metrics text, as GET /simulator/<cluster>/services/<name>/metrics answers."""
        from apps.backends.base import NotFoundError, RetryableBackendError
        from apps.backends.simulator.exporter import scrape_service

        answer = scrape_service(self.cluster.name, name)
        if answer.status == 404:
            raise NotFoundError(answer.body.strip())
        if answer.status != 200:
            raise RetryableBackendError(answer.body.strip())
        return answer.body
