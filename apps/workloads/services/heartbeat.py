"""A running job's progress signal: POST /api/v1/workloads/{id}/heartbeat/ from inside the job.

Only the time of the latest heartbeat is kept (`Workload.last_heartbeat_at`). A heartbeat changes no state, so it
writes no audit event and no timeline line: a job beating every minute would bury its own history. The health
automation's hung-job rule reads it for jobs whose spec sets `progress_timeout_minutes` (apps/health/hung.py).
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.core.errors import Conflict
from apps.core.value_labels import value_label
from apps.workloads.models import Workload, WorkloadState


def record_heartbeat(actor, workload: Workload) -> datetime:
    """Note that the job made progress now. Whoever may submit work in its tenant may (the job runs with its
    submitter's or a tenant member's API token); only a placed job beats."""
    require(
        actor,
        Action.SUBMIT,
        workload.tenant,
        _("You may not report progress of work in tenant %(slug)s.") % {"slug": workload.tenant.slug},
    )
    now = timezone.now()
    placed = (WorkloadState.ADMITTED, WorkloadState.RUNNING)
    if not Workload.objects.filter(pk=workload.pk, state__in=placed).update(last_heartbeat_at=now):
        state = Workload.objects.filter(pk=workload.pk).values_list("state", flat=True).first() or workload.state
        raise Conflict(
            _("Workload %(id)s is %(state)s: only a running job reports progress.")
            % {"id": workload.pk, "state": value_label(state, "workload state")},
            code="not_running",
        )
    workload.last_heartbeat_at = now
    return now
