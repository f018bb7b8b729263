"""Tenancy services: tenants, queues and quotas, admission and its holds, quota requests. Each change is audited
once (a hold follows the audited change that causes it)."""

from apps.tenancy.services.admissions import preview_admission, release_admission, run_admission_pass, submit_admission
from apps.tenancy.services.holds import check_hold, hold_preemptible, lift_hold
from apps.tenancy.services.quota_requests import decide_quota_request, request_quota
from apps.tenancy.services.quotas import (
    bind_queue,
    create_queue,
    delete_queue,
    preview_quota,
    set_guarantee_cap,
    set_quota,
    update_queue,
    update_tier,
)
from apps.tenancy.services.tenants import (
    archive_tenant,
    create_tenant,
    delete_tenant,
    unarchive_tenant,
    update_tenant,
)

__all__ = [
    "archive_tenant",
    "bind_queue",
    "check_hold",
    "create_queue",
    "create_tenant",
    "decide_quota_request",
    "delete_queue",
    "delete_tenant",
    "hold_preemptible",
    "lift_hold",
    "preview_admission",
    "preview_quota",
    "release_admission",
    "request_quota",
    "run_admission_pass",
    "set_guarantee_cap",
    "set_quota",
    "submit_admission",
    "unarchive_tenant",
    "update_queue",
    "update_tenant",
    "update_tier",
]
