"""Workload services, one module per concern: submission (submit, cancel), templates, the outbox that talks
to backends, the reconcile tick, and requeue. Each change is audited once."""

from apps.workloads.services.heartbeat import record_heartbeat
from apps.workloads.services.outbox import drain_outbox, process_outbox_entry
from apps.workloads.services.reconcile import (
    carry_out_reclaims,
    dispatch_admitted,
    reconcile_workloads,
    release_orphan_claims,
    tick,
)
from apps.workloads.services.requeue import requeue_workload
from apps.workloads.services.submission import cancel_workload, submit_workload
from apps.workloads.services.templates import save_template, submit_from_template

__all__ = [
    "cancel_workload",
    "carry_out_reclaims",
    "dispatch_admitted",
    "drain_outbox",
    "process_outbox_entry",
    "reconcile_workloads",
    "record_heartbeat",
    "release_orphan_claims",
    "requeue_workload",
    "save_template",
    "submit_from_template",
    "submit_workload",
    "tick",
]
