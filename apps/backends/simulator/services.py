"""Services that change simulated clusters: set up one's simulation, inject and clear faults, move its clock.

Each of the fault and clock services checks permission, validates, runs in one transaction and writes exactly
one audit event. `actor=None` means the system acting from the command line (`manage.py simulate`): the
permission check is skipped and the audit event names the actor "system". Creating the simulated cluster
itself is fleet's (apps.fleet.services.create_simulated_cluster): it checks the shape here (`clean_shape`)
and sets up the simulation (`set_up_simulation`) in the transaction that saves the cluster.

`cluster` is the fleet Cluster these services are handed (they read its pk, name and kind only).
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event
from apps.backends.simulator.engine import Engine
from apps.backends.simulator.faults import EFFECTS, GPU_KINDS, parse_kind
from apps.backends.simulator.models import SimCluster, SimFault
from apps.backends.simulator.seeding import rng
from apps.backends.simulator.shape import FleetShape, ShapeError, nodes_by_name
from apps.core.errors import Conflict, InvalidInput, NotFound

SIMULATED = "simulated"  # the cluster kind whose backend is this simulator (apps/backends/registry.py)
MAX_ADVANCE_MINUTES = 30 * 24 * 60  # one call simulates at most 30 days: the event loop's work is bounded


def _authorize(actor, action: str, message: str) -> None:
    if actor is None:  # the system, from `manage.py simulate`
        return
    require(actor, action, None, message)


def _simulation(cluster) -> SimCluster:
    if cluster.kind != SIMULATED:
        raise InvalidInput(
            _("Cluster %(name)s is a %(kind)s cluster, not a simulated one.")
            % {"name": cluster.name, "kind": cluster.kind},
            {"cluster": _("Not a simulated cluster.")},
        )
    sim = SimCluster.objects.filter(cluster=cluster).first()
    if sim is None:
        raise NotFound(
            _("Cluster %(name)s has no simulation.") % {"name": cluster.name}, {"cluster": _("No simulation.")}
        )
    return sim


def clean_shape(shape: FleetShape | dict) -> FleetShape:
    """The fleet shape, checked; InvalidInput names the field that is wrong."""
    try:
        value = shape if isinstance(shape, FleetShape) else FleetShape.from_dict(dict(shape))
        return value.validate()
    except ShapeError as exc:
        raise InvalidInput(
            _("Invalid fleet shape: %(message)s") % {"message": exc.message}, {exc.field: exc.message}
        ) from exc
    except TypeError as exc:  # from_dict with a missing required field
        raise InvalidInput(_("Invalid fleet shape: %(exc)s") % {"exc": exc}, {"nodes": _("Required.")}) from exc


def set_up_simulation(cluster) -> SimCluster:
    """The simulation of a newly saved simulated cluster, from the fleet shape in its `connection` (called in the
    transaction that saves the cluster)."""
    shape = clean_shape(cluster.connection or {})
    # Real GPUs have been up a while: boot the fleet 1-30 simulated days ago, so counters start non-zero.
    booted_at = timezone.now() - timedelta(days=rng(shape.seed, "boot").uniform(1, 30))
    return SimCluster.objects.create(cluster=cluster, seed=shape.seed, shape=shape.to_dict(), booted_at=booted_at)


def _check_target(sim: SimCluster, cluster, node: str, kind: str, gpu: int | None) -> None:
    spec = nodes_by_name(sim.fleet_shape()).get(node)
    if spec is None:
        raise NotFound(
            _("No node %(node)s in simulated cluster %(name)s.") % {"node": repr(node), "name": cluster.name},
            {"node": _("No node %(node)s in %(name)s.") % {"node": repr(node), "name": cluster.name}},
        )
    if gpu is None:
        return
    if kind not in GPU_KINDS:
        raise InvalidInput(
            _("A %(kind)s fault hits the whole node; do not name a GPU.") % {"kind": kind},
            {"gpu": _("Not for this kind.")},
        )
    if isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu < len(spec.gpus):
        message = f"No GPU {gpu} on node {node} (it has {len(spec.gpus)}: 0 to {len(spec.gpus) - 1})."
        raise NotFound(message, {"gpu": message})


def inject_fault(actor, cluster, node: str, kind: str, gpu: int | None = None, reason: str = "") -> SimFault:
    """Inject a fault on `node` (and GPU `gpu`; every GPU of the node when None) of a simulated cluster."""
    _authorize(actor, Action.OPERATE, "Only on-call engineers and platform admins inject faults.")
    try:
        kind = parse_kind(kind)
    except ValueError as exc:
        raise InvalidInput(str(exc), {"kind": str(exc)}) from exc
    sim = _simulation(cluster)
    _check_target(sim, cluster, node, kind, gpu)
    with transaction.atomic():
        with Engine.open(cluster) as engine:
            fault, created = engine.inject(node, kind, gpu, reason)
        if not created:
            raise Conflict(
                _("%(fault)s is already active (fault %(pk)s).") % {"fault": fault, "pk": fault.pk},
                {"kind": _("Already active.")},
            )
        record_event(
            actor,
            "simulator.fault.inject",
            fault,
            reason=reason,
            after={
                "cluster": cluster.name,
                "node": node,
                "gpu": gpu,
                "kind": kind.value,
                "effect": EFFECTS[kind].message,
            },
            target_label=f"{cluster.name}: {fault}",
        )
    return fault


def clear_fault(actor, fault: SimFault, reason: str = "") -> SimFault:
    """Clear an active fault: its GPUs (or node) return to service; counters keep what it added."""
    _authorize(actor, Action.OPERATE, "Only on-call engineers and platform admins clear faults.")
    if not fault.active:
        raise Conflict(_("%(fault)s was already cleared.") % {"fault": fault}, {"fault": _("Already cleared.")})
    cluster = fault.sim.cluster
    with transaction.atomic():
        with Engine.open(cluster) as engine:
            cleared = engine.clear(fault.pk)
        record_event(
            actor,
            "simulator.fault.clear",
            cleared,
            reason=reason,
            before={"active": True},
            after={"active": False, "cleared_at": cleared.cleared_at},
            target_label=f"{cluster.name}: {cleared}",
        )
    fault.cleared_at = cleared.cleared_at
    return cleared


def advance_time(actor, cluster, minutes: float, reason: str = "") -> SimCluster:
    """Move a simulated cluster's clock forward: runs end, queued work starts, counters grow."""
    _authorize(actor, Action.OPERATE, "Only on-call engineers and platform admins move simulated time.")
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not math.isfinite(minutes):
        raise InvalidInput(_("Minutes must be a number."), {"minutes": _("A number.")})
    if not 0 < minutes <= MAX_ADVANCE_MINUTES:
        message = f"Advance by more than 0 and at most {MAX_ADVANCE_MINUTES} minutes (30 days), not {minutes:g}."
        raise InvalidInput(message, {"minutes": message})
    _simulation(cluster)
    with transaction.atomic():
        with Engine.open(cluster) as engine:
            before = engine.now
            engine.advance(minutes * 60)
            after = engine.now
        record_event(
            actor,
            "simulator.time.advance",
            cluster,
            reason=reason or f"advance {minutes:g} minutes",
            before={"sim_time": before},
            after={"sim_time": after},
        )
    return engine.sim
