"""GPU health: where telemetry comes from, what each node last reported, rules, incidents, isolation policy,
and the runs faults cost their owners.

Storage is per node, not per sample: `NodeHealth` holds the latest value of every DCGM series per GPU
(one row per node, upserted in bulk each cycle) and the running 1-minute accumulator; `NodeRollup`
holds one row per node and minute with min / avg / max per GPU and rolled-up metric. A 1,280-node
fleet therefore writes 1,280 rows per cycle and 1,280 rollup rows per minute, whatever the number
of series.
"""

from __future__ import annotations

import enum

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from apps.fleet.models import FleetQuerySet


class Severity(models.TextChoices):
    INFO = "info", _("Info")
    WARNING = "warning", _("Warning")
    CRITICAL = "critical", _("Critical")
    FATAL = "fatal", _("Fatal")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("severity", "info"),
            pgettext_lazy("severity", "warning"),
            pgettext_lazy("severity", "critical"),
            pgettext_lazy("severity", "fatal"),
        )
    )


SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2, Severity.FATAL: 3}


class RuleAction(models.TextChoices):
    RECORD = "record", _("Record")
    ALERT = "alert", _("Alert on-call")
    CORDON = "cordon", _("Cordon")
    DRAIN = "drain", _("Drain")
    REQUEST_RESET = "request-reset", _("Request GPU reset")
    REQUEST_RMA = "request-rma", _("Request RMA")


# Actions that take the node out of service (automatically, within the pool's policy and budget).
ISOLATING_ACTIONS = frozenset({RuleAction.CORDON, RuleAction.DRAIN, RuleAction.REQUEST_RESET, RuleAction.REQUEST_RMA})


class SourceKind(models.TextChoices):
    SIMULATOR = "simulator", _("Simulator (in process)")
    EXPORTER = "exporter", _("dcgm-exporter endpoints")
    PROMETHEUS = "prometheus", _("Prometheus server")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("telemetry source", "simulator"),
            pgettext_lazy("telemetry source", "exporter"),
            pgettext_lazy("telemetry source", "prometheus"),
        )
    )


class TelemetrySource(models.Model):
    """Where one cluster's DCGM telemetry is read, and how the last cycle went.

    `exporter`: every inventory node's dcgm-exporter is scraped at `url_pattern` ({node} and {cluster}
    are filled in). `prometheus`: one instant query for the DCGM_* series at `prometheus_url`, grouped
    by the Hostname/hostname label. `simulator`: a simulated cluster's exporter text, read in process.
    """

    cluster = models.OneToOneField("fleet.Cluster", on_delete=models.CASCADE, related_name="telemetry_source")
    kind = models.CharField(max_length=20, choices=SourceKind.choices)
    url_pattern = models.CharField(max_length=500, blank=True, help_text="e.g. http://{node}:9400/metrics")
    prometheus_url = models.CharField(max_length=500, blank=True, help_text="e.g. http://prometheus:9090")
    timeout_s = models.FloatField(default=5.0)
    enabled = models.BooleanField(default=True)
    # Set while a cycle runs (compare-and-set) so two workers never ingest one cluster at once.
    cycle_started_at = models.DateTimeField(null=True, blank=True)
    last_cycle_at = models.DateTimeField(null=True, blank=True)
    last_duration_ms = models.PositiveIntegerField(null=True, blank=True)
    last_nodes = models.PositiveIntegerField(default=0)
    last_unreachable = models.PositiveIntegerField(default=0)
    last_samples = models.PositiveIntegerField(default=0)
    last_malformed = models.PositiveIntegerField(default=0)
    last_sentinels = models.PositiveIntegerField(default=0)
    malformed_by_node = models.JSONField(default=dict, blank=True, help_text="{node: [count, first bad line]}")
    last_error = models.TextField(blank=True)

    objects = FleetQuerySet.as_manager()

    class Meta:
        ordering = ["cluster__name"]

    def __str__(self) -> str:
        return f"{self.cluster.name} ({self.kind})"


class NodeStatus(models.TextChoices):
    OK = "ok", _("OK")
    WARNING = "warning", _("Warning")
    CRITICAL = "critical", _("Critical")
    FATAL = "fatal", _("Fatal")
    SUSPECT = "suspect", _("Suspect (exporter not answering)")
    UNKNOWN = "unknown", _("Unknown")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("severity", "ok"),
            pgettext_lazy("severity", "warning"),
            pgettext_lazy("severity", "critical"),
            pgettext_lazy("severity", "fatal"),
            pgettext_lazy("severity", "suspect"),
            pgettext_lazy("severity", "unknown"),
        )
    )


class IsolationOwner(models.TextChoices):
    NONE = "", _("Not isolated")
    AUTO = "auto", _("Automation")
    HUMAN = "human", _("A human")


class NodeHealth(models.Model):
    """A node's latest DCGM readings, its health status and who isolated it.

    `gpus` is {gpu index: {"uuid", "pod", "namespace", "mig", "v": {metric: value}}} from the last
    scrape; `acc` accumulates the current minute until it turns and a NodeRollup row is written: one
    entry per scrape, [metric names, {index: [values]}], which PostgreSQL appends (the cycle reads it
    only when the minute turns; a row from before holds {index: {metric: [min, sum, max, n]}} first).
    `firing` lists the rule findings firing now.
    """

    node = models.OneToOneField("fleet.Node", on_delete=models.CASCADE, primary_key=True, related_name="health")
    status = models.CharField(max_length=20, choices=NodeStatus.choices, default=NodeStatus.UNKNOWN, db_index=True)
    scraped_at = models.DateTimeField(null=True, blank=True)
    exporter_up = models.BooleanField(default=False)
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    samples = models.PositiveIntegerField(default=0)
    malformed = models.PositiveIntegerField(default=0)
    gpus = models.JSONField(default=dict, blank=True)
    # {gpu index: DCGM_FI_DEV_GPU_UTIL} of the last scrape, empty while the exporter is down: what the overview's
    # heatmap reads (a few bytes stored inline; `gpus` is a ~6 kB document per node that it would decompress).
    gpu_util = models.JSONField(default=dict, blank=True)
    # {gpu index: {metric: value}} of the last scrape, only the counters the increase and rate rules compare with:
    # what the next cycle reads instead of `gpus` (a fifth of its size, so a fifth of the decoding on both sides).
    counters = models.JSONField(default=dict, blank=True)
    acc_minute = models.DateTimeField(null=True, blank=True)
    acc = models.JSONField(default=list, blank=True)
    firing = models.JSONField(default=list, blank=True)
    # Who took the node out of service: automation may resume only what automation isolated.
    isolated_by = models.CharField(max_length=10, choices=IsolationOwner.choices, default="", blank=True)
    isolated_at = models.DateTimeField(null=True, blank=True)

    objects = FleetQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.node_id}: {self.status}"


class NodeRollup(models.Model):
    """One node's minute: {gpu index: {metric: [min, avg, max]}} for the rolled-up metrics."""

    node = models.ForeignKey("fleet.Node", on_delete=models.CASCADE, related_name="+")
    minute = models.DateTimeField(db_index=True)
    data = models.JSONField(default=dict)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "minute"], name="rollup_one_per_node_minute")]

    def __str__(self) -> str:
        return f"{self.node_id} {self.minute:%Y-%m-%d %H:%M}"


class UtilizationHeatmap(models.Model):
    """One cluster's columns of the overview's utilization heatmap, as the health cycle left them (issue 23).

    Written by each ingestion cycle in the transaction that writes the cluster's health rows
    (`apps.health.heatmap.store_heatmap`), so the overview reads ~130 cells a cluster instead of grouping every
    GPU's utilization on each view. `cells` are the heatmap statement's rows for this cluster, each
    [column, first node, last node, nodes in the cluster, first node id, GPU index, mean, min, max, readings]. They
    hold for the nodes counted in `nodes`, `id_sum` and `id_sq` (the cluster's nodes with GPUs that have not
    vanished: their number, and the sums of their ids and squared ids) grouped `group_size` to a column: the
    overview uses them only while the fleet still gives the same, and groups the nodes itself otherwise.
    """

    cluster = models.OneToOneField("fleet.Cluster", on_delete=models.CASCADE, primary_key=True, related_name="+")
    group_size = models.PositiveIntegerField()
    nodes = models.PositiveIntegerField()
    id_sum = models.DecimalField(max_digits=40, decimal_places=0)
    id_sq = models.DecimalField(max_digits=40, decimal_places=0)
    cells = models.JSONField(default=list)
    computed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.cluster_id}: {self.nodes} nodes, {self.group_size} a column"


class RuleKind(models.TextChoices):
    XID = "xid", _("XID codes (last XID value)")
    THRESHOLD = "threshold", _("Value (or sum of values) against a threshold")
    INCREASE = "increase", _("Counter increased since the last scrape")
    RATE = "rate", _("Counter rate (per second or per minute)")
    BITMASK = "bitmask", _("Bits set in a bitmask")
    GPU_MISSING = "gpu-missing", _("A GPU the inventory knows is missing from the exporter")
    EXPORTER_DOWN = "exporter-down", _("The exporter does not answer")
    HUNG_JOB = "hung-job", _("A running training job's GPUs idle for a window, or its heartbeat stopped")


class RuleSet(models.Model):
    """One version of the health rules. Tuning a rule writes a new version; the newest is in force."""

    version = models.PositiveIntegerField(unique=True)
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey("accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = FleetQuerySet.as_manager()

    class Meta:
        ordering = ["-version"]

    def __str__(self) -> str:
        return f"rules v{self.version}"


class Rule(models.Model):
    """One health rule of a rule set version: what it watches (`kind`, `params`), how bad, what to do."""

    ruleset = models.ForeignKey(RuleSet, on_delete=models.CASCADE, related_name="rules")
    key = models.SlugField(max_length=60)
    cause = models.SlugField(max_length=60, help_text="incidents are one per node and cause")
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=RuleKind.choices)
    params = models.JSONField(default=dict, blank=True)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    action = models.CharField(max_length=20, choices=RuleAction.choices)
    enabled = models.BooleanField(default=True)

    objects = FleetQuerySet.as_manager()

    class Meta:
        ordering = ["ruleset", "key"]
        constraints = [models.UniqueConstraint(fields=["ruleset", "key"], name="rule_key_unique_per_version")]

    def __str__(self) -> str:
        return f"{self.key} (v{self.ruleset.version})"


class IsolationPolicy(models.Model):
    """Per pool (or the default when `pool` is empty): which severities isolate automatically, and the budget.

    The budget: at most `max_nodes_per_hour` nodes, and at most `max_percent_per_hour` % of the pool,
    isolated automatically in any hour. Beyond it incidents wait for a human and one storm alert fires.
    """

    pool = models.OneToOneField(
        "fleet.NodePool", null=True, blank=True, on_delete=models.CASCADE, related_name="isolation_policy"
    )
    cordon_severities = models.JSONField(default=list, blank=True)
    drain_severities = models.JSONField(default=list, blank=True)
    max_nodes_per_hour = models.PositiveIntegerField(default=4)
    max_percent_per_hour = models.FloatField(default=10.0)
    enabled = models.BooleanField(default=True)

    objects = FleetQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pool"], condition=Q(pool__isnull=True), name="one_default_isolation_policy"
            ),
            models.CheckConstraint(
                condition=Q(max_percent_per_hour__gte=0) & Q(max_percent_per_hour__lte=100),
                name="isolation_percent_0_100",
                violation_error_message="The share of a pool is a percentage from 0 to 100.",
            ),
        ]

    def __str__(self) -> str:
        return f"isolation policy for {self.pool or 'every pool'}"


class IncidentState(models.TextChoices):
    DETECTED = "detected", _("Detected")
    ISOLATING = "isolating", _("Isolating")
    ISOLATED = "isolated", _("Isolated")
    DRAINING = "draining", _("Draining")
    DRAINED = "drained", _("Drained")
    REPAIRING = "repairing", _("Repairing")
    VALIDATING = "validating", _("Validating")
    RESOLVED = "resolved", _("Resolved")
    FALSE_POSITIVE = "false-positive", _("False positive")

    # Marks for the `label` filter (apps/core/value_labels.py): the code itself in English, a word elsewhere.
    value_labels = enum.nonmember(
        (
            pgettext_lazy("incident state", "detected"),
            pgettext_lazy("incident state", "isolating"),
            pgettext_lazy("incident state", "isolated"),
            pgettext_lazy("incident state", "draining"),
            pgettext_lazy("incident state", "drained"),
            pgettext_lazy("incident state", "repairing"),
            pgettext_lazy("incident state", "validating"),
            pgettext_lazy("incident state", "resolved"),
            pgettext_lazy("incident state", "false-positive"),
        )
    )


CLOSED_STATES = frozenset({IncidentState.RESOLVED, IncidentState.FALSE_POSITIVE})

# The state machine. Every state may also become a false positive while open.
TRANSITIONS: dict[str, frozenset[str]] = {
    IncidentState.DETECTED: frozenset({IncidentState.ISOLATING, IncidentState.RESOLVED}),
    IncidentState.ISOLATING: frozenset({IncidentState.ISOLATED, IncidentState.DETECTED}),
    IncidentState.ISOLATED: frozenset({IncidentState.DRAINING, IncidentState.REPAIRING, IncidentState.VALIDATING}),
    IncidentState.DRAINING: frozenset({IncidentState.DRAINED, IncidentState.ISOLATED}),
    IncidentState.DRAINED: frozenset({IncidentState.REPAIRING, IncidentState.VALIDATING}),
    IncidentState.REPAIRING: frozenset({IncidentState.VALIDATING}),
    IncidentState.VALIDATING: frozenset({IncidentState.RESOLVED, IncidentState.REPAIRING}),
    IncidentState.RESOLVED: frozenset(),
    IncidentState.FALSE_POSITIVE: frozenset(),
}


class IncidentQuerySet(models.QuerySet):
    def for_user(self, user, action: str) -> IncidentQuerySet:
        """Console-wide viewers see every incident; tenant members see those that touch their tenants' work."""
        from apps.accounts.permissions import allowed_tenant_ids

        ids = allowed_tenant_ids(user, action)
        if ids is None:
            return self
        return self.filter(tenants__in=ids).distinct()

    def open(self) -> IncidentQuerySet:
        return self.exclude(state__in=CLOSED_STATES)


class Incident(models.Model):
    """A health problem of one node with one cause (deduplicated: one open incident per node and cause).

    `evidence` holds the findings that opened and re-confirmed it, each explainable on its own
    ("DCGM_FI_DEV_XID_ERRORS = 79 on GPU 3 (UUID …) of node gpu-07 at 12:03:15"). `waiting_for`
    says why automation stopped short (the isolation budget, an online-inference minimum, policy).
    """

    node = models.ForeignKey("fleet.Node", on_delete=models.CASCADE, related_name="incidents")
    cause = models.SlugField(max_length=60)
    rule_key = models.SlugField(max_length=60)
    ruleset_version = models.PositiveIntegerField()
    title = models.CharField(max_length=300)
    severity = models.CharField(max_length=10, choices=Severity.choices, db_index=True)
    action = models.CharField(max_length=20, choices=RuleAction.choices)
    state = models.CharField(
        max_length=20, choices=IncidentState.choices, default=IncidentState.DETECTED, db_index=True
    )
    evidence = models.JSONField(default=list, blank=True)
    gpus = models.JSONField(default=list, blank=True, help_text="[{index, uuid}] of the GPUs involved")
    workloads = models.ManyToManyField("workloads.Workload", blank=True, related_name="incidents")
    tenants = models.ManyToManyField("accounts.Tenant", blank=True, related_name="+")
    auto_isolated_at = models.DateTimeField(null=True, blank=True, db_index=True, help_text="isolated by automation")
    waiting_for = models.CharField(max_length=300, blank=True)
    occurrences = models.PositiveIntegerField(default=1)
    detected_at = models.DateTimeField(db_index=True)
    last_seen_at = models.DateTimeField()
    clean_since = models.DateTimeField(null=True, blank=True, help_text="no finding of this cause since")
    closed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = IncidentQuerySet.as_manager()

    class Meta:
        ordering = ["-detected_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "cause"],
                condition=~Q(state__in=["resolved", "false-positive"]),
                name="one_open_incident_per_node_cause",
                violation_error_message="This node already has an open incident for this cause.",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    @property
    def is_open(self) -> bool:
        return self.state not in CLOSED_STATES

    def allowed_transitions(self) -> list[str]:
        if not self.is_open:
            return []
        return [*sorted(TRANSITIONS[self.state]), IncidentState.FALSE_POSITIVE]


class IncidentEvent(models.Model):
    """One line of an incident's timeline: a transition, a finding, an action, a notification."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="events")
    time = models.DateTimeField(auto_now_add=True)
    actor_label = models.CharField(max_length=200)
    kind = models.CharField(max_length=40)
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20, blank=True)
    message = models.CharField(max_length=1000)

    class Meta:
        ordering = ["time", "id"]

    def __str__(self) -> str:
        return f"{self.time:%H:%M:%S} {self.kind}: {self.message}"


class LostRun(models.Model):
    """A run a hardware fault killed or evicted, as health saw it: what its owner is owed GPU time for.

    The runbook operations record it (apps/health/operation_handlers.py) when they stop or find dead work on a node
    with an open incident; chargeback pulls the rows it has not taken yet and credits their owners
    (apps/chargeback/credits.py), then notes when and with what outcome. `interrupted_at` is in the backend's
    clock, as usage is. Health knows nothing of what a credit is worth, or of chargeback.
    """

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="lost_runs")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="+")
    backend_id = models.CharField(max_length=253, help_text="the interrupted run as the backend names it")
    interrupted_at = models.DateTimeField()
    reason = models.CharField(max_length=500)
    actor = models.ForeignKey("accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    taken_at = models.DateTimeField(null=True, blank=True, help_text="when chargeback took it into account")
    outcome = models.CharField(max_length=300, blank=True, help_text="what chargeback made of it")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "backend_id", "interrupted_at"], name="lostrun_one_per_run")
        ]
        indexes = [models.Index(fields=["id"], condition=Q(taken_at__isnull=True), name="lostrun_not_taken")]

    def __str__(self) -> str:
        return f"{self.backend_id} at {self.interrupted_at:%Y-%m-%d %H:%M}"


class StormAlert(models.Model):
    """Fired once when a pool's isolation budget runs out; no second alert for that pool within the hour."""

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="+")
    pool = models.ForeignKey("fleet.NodePool", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    fired_at = models.DateTimeField(db_index=True)
    waiting = models.PositiveIntegerField(default=0, help_text="incidents left for a human when it fired")

    class Meta:
        ordering = ["-fired_at"]

    def __str__(self) -> str:
        return f"storm in {self.pool or self.cluster} at {self.fired_at:%H:%M}"
