"""Inference service telemetry: scrape state, the time series, SLO targets and burn-rate alerts.

All rows hang off the service's Workload, so they are tenant-scoped through it (`for_user` on Workload
first, then these by workload id).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class TelemetryStatus(models.TextChoices):
    NEVER = "never", _("Not scraped yet")
    OK = "ok", _("Fresh")
    STALE = "stale", _("Stale (endpoint not answering)")
    NO_SOURCE = "no-source", _("No metrics endpoint known")


class ServiceTelemetry(models.Model):
    """One service's scrape state: where its engines' /metrics are, how fresh, errors, and the last totals.

    `totals` holds each series' cumulative counters and histogram buckets from the last good scrape, so the
    next scrape turns them into per-interval deltas (per series, so a replica that restarts or goes away
    is a reset of its own series, not a drop of the sum).
    """

    workload = models.OneToOneField(
        "workloads.Workload", primary_key=True, on_delete=models.CASCADE, related_name="telemetry"
    )
    source = models.CharField(max_length=1000, blank=True, help_text="the URL scraped")
    status = models.CharField(max_length=20, choices=TelemetryStatus.choices, default=TelemetryStatus.NEVER)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    scrape_errors = models.PositiveIntegerField(default=0, help_text="scrapes that got no answer or an unreadable one")
    histogram_errors = models.PositiveIntegerField(default=0, help_text="histograms skipped for bad buckets")
    totals = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name_plural = "service telemetry"

    def __str__(self) -> str:
        return f"telemetry of workload {self.workload_id} ({self.status})"


class TelemetrySample(models.Model):
    """One scrape interval of one service. Latencies in seconds; quantiles over the interval's observations.

    `requests`/`ttft_slow` and `tokens`/`tpot_slow` are the interval's observations and those above the
    service's SLO target at scrape time: the burn-rate windows sum them.
    """

    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE, related_name="telemetry_samples")
    time = models.DateTimeField()
    interval_s = models.FloatField(null=True, blank=True)
    ttft_p50 = models.FloatField(null=True, blank=True)
    ttft_p99 = models.FloatField(null=True, blank=True)
    tpot_p50 = models.FloatField(null=True, blank=True)
    tpot_p99 = models.FloatField(null=True, blank=True)
    running = models.FloatField(null=True, blank=True)
    waiting = models.FloatField(null=True, blank=True)
    kv_cache = models.FloatField(null=True, blank=True, help_text="0..1, mean over replicas")
    tokens_per_s = models.FloatField(null=True, blank=True, help_text="generated tokens/s")
    prompt_tokens_per_s = models.FloatField(null=True, blank=True)
    replicas = models.PositiveIntegerField(null=True, blank=True)
    requests = models.FloatField(default=0.0)
    ttft_slow = models.FloatField(default=0.0)
    tokens = models.FloatField(default=0.0)
    tpot_slow = models.FloatField(default=0.0)

    class Meta:
        ordering = ["time", "id"]
        indexes = [
            models.Index(fields=["workload", "time"], name="telemetry_sample_series"),
            models.Index(fields=["time"], name="telemetry_sample_time"),
        ]

    def __str__(self) -> str:
        return f"{self.workload_id}@{self.time.isoformat(timespec='seconds')}"


class ServiceSlo(models.Model):
    """A service's latency objectives: `objective` of requests within each target (0.99: "p99 <= target").

    Services without a row use the defaults below; the first edit creates the row.
    """

    DEFAULT_TTFT_S = 2.0
    DEFAULT_TPOT_S = 0.1
    DEFAULT_OBJECTIVE = 0.99

    workload = models.OneToOneField(
        "workloads.Workload", primary_key=True, on_delete=models.CASCADE, related_name="slo"
    )
    ttft_target_s = models.FloatField(default=DEFAULT_TTFT_S)
    tpot_target_s = models.FloatField(default=DEFAULT_TPOT_S)
    objective = models.FloatField(default=DEFAULT_OBJECTIVE)
    updated_by = models.ForeignKey("accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "service SLO"
        constraints = [
            models.CheckConstraint(
                condition=Q(objective__gt=0) & Q(objective__lt=1), name="slo_objective_between_0_and_1"
            ),
            models.CheckConstraint(condition=Q(ttft_target_s__gt=0), name="slo_ttft_target_positive"),
            models.CheckConstraint(condition=Q(tpot_target_s__gt=0), name="slo_tpot_target_positive"),
        ]

    def __str__(self) -> str:
        return f"SLO of workload {self.workload_id}: TTFT {self.ttft_target_s:g} s, TPOT {self.tpot_target_s:g} s"

    @property
    def percentile_label(self) -> str:
        return f"p{self.objective * 100:g}"


class Sli(models.TextChoices):
    TTFT = "ttft", _("Time to first token")
    TPOT = "tpot", _("Time per output token")


class BurnWindow(models.TextChoices):
    FAST = "fast", _("Fast burn (1 h and 5 min)")
    SLOW = "slow", _("Slow burn (6 h and 30 min)")


class AlertState(models.TextChoices):
    FIRING = "firing", _("Firing")
    RESOLVED = "resolved", _("Resolved")


class ServiceAlert(models.Model):
    """A burn-rate alert: fired when both windows of a pair burn the error budget too fast, resolved when the
    short window recovers. At most one firing alert per (service, SLI, window pair)."""

    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE, related_name="service_alerts")
    sli = models.CharField(max_length=10, choices=Sli.choices)
    window = models.CharField(max_length=10, choices=BurnWindow.choices)
    state = models.CharField(max_length=10, choices=AlertState.choices, default=AlertState.FIRING)
    fired_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    burn_long = models.FloatField(help_text="burn rate over the long window when it fired")
    burn_short = models.FloatField(help_text="burn rate over the short window when it fired")
    threshold = models.FloatField()
    message = models.CharField(max_length=500)

    class Meta:
        ordering = ["-fired_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workload", "sli", "window"],
                condition=Q(state="firing"),
                name="one_firing_alert_per_sli_window",
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_sli_display()} {self.get_window_display()} on workload {self.workload_id} ({self.state})"
