"""The simulator's persistent state, shared by the web, worker and beat processes through the database.

Registered under the `backends` app (apps/backends/models.py imports this module; the tables and
migrations are the app's: backends_simcluster, ...).

Only what differs from the generated fleet is stored: the fleet itself (nodes, GPUs, UUIDs) is
regenerated from the shape and seed. All times here are simulated time (real time + the cluster's
clock offset), so `simulate advance` moves every clock the backend reports consistently.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext

from apps.backends.simulator.faults import KINDS
from apps.backends.types import BackendState

ACTIVE_STATES = (BackendState.PENDING, BackendState.RUNNING)


class SimCluster(models.Model):
    """A simulated cluster: its fleet shape, seed and clock, and the quotas and image pre-pulls pushed to it."""

    cluster = models.OneToOneField("fleet.Cluster", on_delete=models.CASCADE, related_name="simulation")
    seed = models.BigIntegerField()
    shape = models.JSONField(help_text="FleetShape.to_dict()")
    clock_offset_s = models.FloatField(default=0.0, help_text="simulated time = real time + this")
    booted_at = models.DateTimeField(help_text="simulated time the fleet powered on; counters start here")
    next_event_at = models.DateTimeField(
        null=True, blank=True, help_text="earliest simulated time a running workload ends (cheap 'is a tick due?')"
    )
    quotas = models.JSONField(default=dict, blank=True, help_text="pushed quotas by tenant/queue/model")
    quotas_pushed_at = models.DateTimeField(null=True, blank=True)
    # Images node pools pre-pull, as pushed: {pool: {image: simulated time its nodes hold it}} (coldstart.py).
    prepulled = models.JSONField(default=dict, db_default={}, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "simulated cluster"

    def __str__(self) -> str:
        return f"simulation of {self.cluster.name}"

    def sim_now(self, real: datetime | None = None) -> datetime:
        return (real or timezone.now()) + timedelta(seconds=self.clock_offset_s)

    def fleet_shape(self):
        from apps.backends.simulator.shape import FleetShape

        return FleetShape.from_dict(self.shape)


class SimNode(models.Model):
    """Operator state of one node that differs from the default: cordon, drain and taints.

    Down and exporter-down are not stored here: they are faults (SimFault), so clearing the fault
    is what brings the node back. Rows that return to the default are deleted.
    """

    sim = models.ForeignKey(SimCluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    cordoned = models.BooleanField(default=False)
    cordon_reason = models.CharField(max_length=500, blank=True)
    drained = models.BooleanField(default=False)
    drain_reason = models.CharField(max_length=500, blank=True)
    taints = models.JSONField(default=list, blank=True, help_text="[{key, value, effect}]")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["sim", "name"], name="simnode_unique_per_sim")]

    def __str__(self) -> str:
        return self.name

    @property
    def is_default(self) -> bool:
        return not (self.cordoned or self.drained or self.taints)


class SimWorkload(models.Model):
    """A workload submitted to a simulated cluster; its name is its backend id.

    Its duration and outcome are fixed at submission from the seed and the name, so the same seed
    and the same submissions give the same history however often the clock is ticked.
    """

    sim = models.ForeignKey(SimCluster, on_delete=models.CASCADE, related_name="workloads")
    name = models.CharField(max_length=253)
    tenant = models.CharField(max_length=100, blank=True)
    queue = models.CharField(max_length=100, blank=True)
    gpu_model = models.CharField(max_length=20, blank=True)
    priority = models.IntegerField(default=500)
    spec = models.JSONField(help_text="the WorkloadSpec as submitted (without the rendered manifest)")
    state = models.CharField(max_length=20, choices=[(s.value, s.value) for s in BackendState])
    reason = models.CharField(max_length=500, blank=True)
    submitted_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True, help_text="when the current run ends (running only)")
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.PositiveIntegerField(help_text="run time to succeed")
    fail_after_s = models.PositiveIntegerField(null=True, blank=True, help_text="set when the seed makes it fail")
    max_runtime_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="the runtime limit: a run still going then is stopped (timed out)"
    )
    attempts = models.PositiveIntegerField(default=0, help_text="runs started (a drain requeues)")
    # Behaviour labels (specs.HANG_LABEL, specs.IDLE_PHASE_LABEL), kept as columns: the exporter reads them for every
    # running workload on every scrape, and running work's spec is not loaded (Engine defers it).
    hang_after_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="from this many seconds into each run its GPUs go quiet (a hung job)"
    )
    idle_phase_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="the first seconds of each run are idle (data loading)"
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["sim", "name"], name="simworkload_unique_name_per_sim")]
        indexes = [models.Index(fields=["sim", "state"], name="simworkload_sim_state")]

    def __str__(self) -> str:
        return self.name

    @property
    def work_s(self) -> int:
        """How long the run goes on by itself: to its failure, or to the end of its work."""
        return self.fail_after_s if self.fail_after_s is not None else self.duration_s

    @property
    def run_s(self) -> int:
        """How long a run lasts: its work, or its runtime limit when that comes first."""
        return min(self.work_s, self.max_runtime_s) if self.max_runtime_s else self.work_s

    def computing_at(self, now) -> bool:
        """Does the current run keep its GPUs busy at `now`? No during its idle phase and once it hangs."""
        if self.started_at is None:
            return False
        into = (now - self.started_at).total_seconds()
        if self.idle_phase_s and into < self.idle_phase_s:
            return False
        return not (self.hang_after_s is not None and into >= self.hang_after_s)

    @property
    def times_out(self) -> bool:
        """The runtime limit stops the run before its work (or its failure) ends it."""
        return bool(self.max_runtime_s) and self.work_s > self.max_runtime_s


class SimEvent(models.Model):
    """One line of a workload's history (submitted, started, evicted, finished). Append-only.

    Kept apart from SimWorkload so loading the active workloads for a tick never parses histories.
    """

    workload = models.ForeignKey(SimWorkload, on_delete=models.CASCADE, related_name="history")
    at = models.DateTimeField(help_text="simulated time")
    text = models.CharField(max_length=500)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.at.isoformat(timespec='seconds')} {self.text}"


class SimAllocation(models.Model):
    """GPUs one worker of a workload held on one node, from start to end (null while running).

    Open rows are the cluster's current occupancy; closed rows are the usage history `usage_since` reads.
    """

    sim = models.ForeignKey(SimCluster, on_delete=models.CASCADE, related_name="allocations")
    workload = models.ForeignKey(SimWorkload, on_delete=models.CASCADE, related_name="allocations")
    worker = models.PositiveIntegerField()
    node = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=20)
    gpu_indexes = models.JSONField()
    mode = models.CharField(max_length=10, help_text="whole | mig | shared | mps")
    share = models.FloatField(help_text="part of each GPU held: 1, slices/7 (MIG) or a fraction")
    mig_profile = models.CharField(max_length=20, blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # An inference replica's worker: when it serves (its image pulled, weights loaded, engine started: coldstart.py).
    ready_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["sim", "node"], condition=Q(ended_at__isnull=True), name="simalloc_open_by_node"),
            models.Index(fields=["sim", "ended_at"], name="simalloc_sim_ended"),
        ]

    def __str__(self) -> str:
        return f"{self.workload_id}/{self.worker}@{self.node}"

    @property
    def gpu_fraction(self) -> float:
        return len(self.gpu_indexes) * self.share


class SimFault(models.Model):
    """An injected fault on a node (and a GPU, or every GPU of the node when `gpu_index` is null)."""

    sim = models.ForeignKey(SimCluster, on_delete=models.CASCADE, related_name="faults")
    node = models.CharField(max_length=253)
    gpu_index = models.PositiveSmallIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=30, choices=[(kind, kind) for kind in KINDS])
    reason = models.CharField(max_length=500, blank=True)
    injected_at = models.DateTimeField(help_text="simulated time")
    cleared_at = models.DateTimeField(null=True, blank=True, help_text="simulated time")

    class Meta:
        indexes = [models.Index(fields=["sim", "node"], name="simfault_sim_node")]

    def __str__(self) -> str:
        # English: the audit log stores it as the event's target label.
        return f"{self.kind} on {self.where}"

    @property
    def where(self) -> str:
        return self.node if self.gpu_index is None else f"{self.node}/gpu{self.gpu_index}"

    @property
    def label(self) -> str:
        """What it is, in the reader's language (the node page's fault list and messages)."""
        return gettext("%(kind)s on %(where)s") % {"kind": self.kind, "where": self.where}

    @property
    def active(self) -> bool:
        return self.cleared_at is None

    def hits(self, gpu_index: int) -> bool:
        return self.gpu_index is None or self.gpu_index == gpu_index
