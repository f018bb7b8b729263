"""The English a workload's `state_reason` and timeline events are made of (templates marked for translation).

Stored in English like the admission reasons they embed (apps/tenancy/admission.py): the API returns them
as they are and apps/observability/reasons.py sorts them by their words. A page shows them in the reader's
language through apps/core/stored_text.py, which recognises these templates; a backend's own reason
("0/4 nodes are available: ...") is shown as the backend wrote it.
"""

from __future__ import annotations

from apps.core.text import gettext_noop

# state_reason
CANCELLED_BY = gettext_noop("cancelled by %(user)s")
REQUEUED_AFTER_PREEMPTION = gettext_noop("requeued after preemption: %(reason)s")
REQUEUED_AFTER_FAULT = gettext_noop("requeued after a GPU fault (%(fault)s); admission: %(reason)s")
REQUEUED_AFTER_HANG = gettext_noop("requeued: its run hung (%(fault)s); admission: %(reason)s")
PREEMPTED_FOR_LENDER = gettext_noop("preempted to give a lender its guarantee back")
BACKEND_REFUSED = gettext_noop("backend refused it: %(error)s")
BACKEND_FORGOT = gettext_noop("the backend no longer knows this workload")
# The backend stopped the run at the spec's max_runtime_s (Kubernetes DeadlineExceeded, Slurm TIMEOUT): a failure,
# whatever the backend calls it; %(detail)s is the backend's own words.
RUNTIME_LIMIT_REACHED = gettext_noop("runtime limit reached (max_runtime_s %(max_runtime)s): %(detail)s")
RUNTIME_LIMIT_PREFIX = RUNTIME_LIMIT_REACHED.partition(" (")[0]  # how a stored reason is recognised: stored in English
# The detail when the console itself stopped a run its backend let go on past the limit (a Volcano Job restarts a
# pod its activeDeadlineSeconds failed; a Deployment has no deadline at all).
STOPPED_BY_CONSOLE = gettext_noop("still running %(seconds)s s after its start; the console stopped it")
# events
SUBMITTED = gettext_noop("submitted by %(user)s; admission: %(decision)s: %(reason)s")
SUBMITTED_TO = gettext_noop("submitted to %(cluster)s as %(backend_id)s: %(backend_state)s")
SUBMITTED_TO_WHY = gettext_noop("submitted to %(cluster)s as %(backend_id)s: %(backend_state)s %(reason)s")
STATE_CHANGED = gettext_noop("%(from_state)s → %(to_state)s")
STATE_CHANGED_WHY = gettext_noop("%(from_state)s → %(to_state)s: %(reason)s")
BACKEND_RETRY = gettext_noop("%(error)s (retry %(attempt)s in %(delay)s s)")
REQUEUED = gettext_noop("requeued (%(run)s of %(retries)s)")
REQUEUED_FAULT_EVENT = gettext_noop("requeued after a GPU fault (run %(run)s): %(reason)s")
REQUEUED_HANG_EVENT = gettext_noop("requeued: its run hung (%(run)s of %(retries)s): %(reason)s")
RECLAIMED = gettext_noop("reclaimed by the queue it borrowed from")

STORED_TEMPLATES = (
    CANCELLED_BY,
    REQUEUED_AFTER_PREEMPTION,
    REQUEUED_AFTER_FAULT,
    REQUEUED_AFTER_HANG,
    PREEMPTED_FOR_LENDER,
    BACKEND_REFUSED,
    BACKEND_FORGOT,
    RUNTIME_LIMIT_REACHED,
    STOPPED_BY_CONSOLE,
    SUBMITTED,
    SUBMITTED_TO,
    SUBMITTED_TO_WHY,
    STATE_CHANGED,
    STATE_CHANGED_WHY,
    BACKEND_RETRY,
    REQUEUED,
    REQUEUED_FAULT_EVENT,
    REQUEUED_HANG_EVENT,
    RECLAIMED,
)
# What the numbers look like (apps/core/stored_text.py splits a text at them).
STORED_PARAMS = dict.fromkeys(("run", "retries", "attempt", "delay", "max_runtime"), r"\d+")
# Parameters that are stored codes, shown through their value labels (apps/core/value_labels.py).
STORED_LABELS = {
    "decision": "admission decision",
    "from_state": "workload state",
    "to_state": "workload state",
    "backend_state": "workload state",
}
