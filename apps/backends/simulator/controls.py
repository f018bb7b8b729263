"""The controls of one cluster's simulation, for the console above the backends (fleet's node page and
`manage.py simulate`, the chargeback demo): faults, the clock, the fleet shape and a summary.

`SimulatorBackend.simulation()` returns one bound to its cluster; `SimulatorBackend.simulation_class` is this
class, whose class-level helpers check a fleet shape before the cluster exists. Callers never import the
simulator: they ask the Backend interface for these.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext

from apps.backends.simulator import reports, services
from apps.backends.simulator.engine import Engine
from apps.backends.simulator.faults import EFFECTS, KINDS
from apps.backends.simulator.models import SimAllocation, SimCluster, SimFault, SimWorkload
from apps.backends.simulator.shape import HOSTNAME_LABELS, ShapeError, parse_models
from apps.core.errors import InvalidInput


class Simulation:
    """A simulated cluster's own controls, beyond the Backend interface."""

    FAULT_KINDS = KINDS
    HOSTNAME_LABELS = HOSTNAME_LABELS

    def __init__(self, cluster):
        self.cluster = cluster

    # The fleet shape, before the cluster exists (cluster creation)

    @staticmethod
    def clean_shape(shape: dict) -> dict:
        """The fleet shape checked and completed with its defaults; InvalidInput names the field that is wrong."""
        return services.clean_shape(shape).to_dict()

    @staticmethod
    def describe_shape(shape: dict) -> str:
        """One line about the fleet, e.g. "32 nodes x 8 GPUs (h100 50%, ...), seed 42"."""
        return services.clean_shape(shape).describe()

    @staticmethod
    def parse_models(text: str) -> dict[str, float]:
        """`"h100:0.5,a100:0.5"` as the shape's model mix; InvalidInput (field "models") on bad syntax."""
        try:
            return parse_models(text)
        except ShapeError as exc:
            raise InvalidInput(exc.message, {exc.field: exc.message}) from exc

    # The simulation

    def set_up(self) -> None:
        """Create the simulation of the newly saved cluster from its `connection` (the fleet shape)."""
        services.set_up_simulation(self.cluster)

    def exists(self) -> bool:
        return SimCluster.objects.filter(cluster=self.cluster).exists()

    def describe(self) -> str:
        return SimCluster.objects.get(cluster=self.cluster).fleet_shape().describe()

    def replay_from(self, start: datetime, booted_at: datetime) -> None:
        """Set the clock back to `start` (a replay of the past; it only moves forward afterwards)."""
        sim = SimCluster.objects.get(cluster=self.cluster)
        sim.clock_offset_s = (start - timezone.now()).total_seconds()
        sim.booted_at = booted_at
        sim.save(update_fields=["clock_offset_s", "booted_at"])

    def advance(self, actor, minutes: float, reason: str = "") -> datetime:
        """Move the clock forward (audited); returns the simulated time afterwards."""
        return services.advance_time(actor, self.cluster, minutes, reason).sim_now()

    def busy_node(self, gpu_model: str) -> str:
        """A node where a workload holds GPUs of `gpu_model` now ('' when none does)."""
        row = (
            SimAllocation.objects.filter(sim__cluster=self.cluster, ended_at__isnull=True, gpu_model=gpu_model)
            .values_list("node", flat=True)
            .first()
        )
        return row or ""

    # Faults

    def fault_choices(self) -> list[tuple[str, str]]:
        """(kind, what it does, in the reader's language) for each fault kind."""
        return [(kind.value, gettext(effect.message)) for kind, effect in EFFECTS.items()]

    def faults_on(self, node: str, limit: int = 20):
        """The node's latest faults, newest first (active and cleared)."""
        return SimFault.objects.filter(sim__cluster=self.cluster, node=node).order_by("-id")[:limit]

    def fault(self, fault_id: int, node: str) -> SimFault | None:
        return SimFault.objects.filter(pk=fault_id, sim__cluster=self.cluster, node=node).first()

    def active_fault(self, node: str, kind: str, gpu: int | None) -> SimFault | None:
        return SimFault.objects.filter(
            sim__cluster=self.cluster, node=node, kind=kind, gpu_index=gpu, cleared_at__isnull=True
        ).first()

    def inject_fault(self, actor, node: str, kind: str, gpu: int | None = None, reason: str = "") -> SimFault:
        return services.inject_fault(actor, self.cluster, node, kind, gpu, reason)

    def clear_fault(self, actor, fault: SimFault, reason: str = "") -> SimFault:
        return services.clear_fault(actor, fault, reason)

    # A summary (`manage.py simulate status`)

    def summary(self) -> str:
        with Engine.open(self.cluster) as engine:
            inventory = reports.inventory(engine)
            faults = engine.active_faults()
            offset = engine.sim.clock_offset_s
            now = engine.now
            shape = engine.shape
        gpus = [gpu for node in inventory.nodes for gpu in node.gpus]
        health = {h: sum(1 for g in gpus if g.health == h) for h in ("unhealthy", "warning", "unknown")}
        counts = dict.fromkeys(("pending", "running", "succeeded", "failed", "cancelled"), 0)
        for state in SimWorkload.objects.filter(sim=engine.sim).values_list("state", flat=True):
            counts[state] = counts.get(state, 0) + 1
        lines = [
            f"{self.cluster.name} (simulated): {shape.describe()}",
            f"simulated time {now.isoformat(timespec='seconds')} (offset {offset / 60:+.0f} min)",
            f"nodes {len(inventory.nodes)}: {sum(n.unschedulable for n in inventory.nodes)} cordoned, "
            f"{sum(n.state == 'down' for n in inventory.nodes)} down",
            f"GPUs {len(gpus)}: {sum(1 for g in gpus if g.allocated_fraction > 0)} in use, "
            + ", ".join(f"{n} {h}" for h, n in health.items()),
            "workloads: " + ", ".join(f"{n} {state}" for state, n in counts.items()),
            f"active faults: {len(faults)}",
            *(f"  {f} since {f.injected_at.isoformat(timespec='seconds')} (fault {f.pk})" for f in faults),
        ]
        return "\n".join(lines)
