"""POST /api/v1/workloads/{id}/heartbeat/: a running job's progress signal (issue 24), for every persona."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.workloads.models import Workload
from apps.workloads.services import reconcile_workloads, submit_workload
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec

pytestmark = pytest.mark.django_db

# Who may report a job's progress: whoever may submit work in its tenant (the job runs with such a token).
EXPECTED = {
    "platform_admin": 200,
    "tenant_admin_a": 200,
    "member_a": 200,
    "member_b": 404,  # another tenant's work is not even visible
    "oncall": 403,  # sees every workload, submits none
    "viewer_a": 403,
}


@pytest.fixture
def running(fleet, personas, django_capture_on_commit_callbacks) -> Workload:
    spec = training_spec(progress_timeout_minutes=15)
    with django_capture_on_commit_callbacks(execute=True):
        workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=spec)
    reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running" and workload.spec["progress_timeout_minutes"] == 15
    return workload


@pytest.mark.parametrize(("persona", "status"), sorted(EXPECTED.items()))
def test_who_may_send_a_heartbeat(persona, status, running, personas, api):
    response = api(fresh(personas.user(persona))).post(f"/api/v1/workloads/{running.pk}/heartbeat/")
    assert response.status_code == status, response.content
    running.refresh_from_db()
    assert (running.last_heartbeat_at is not None) == (status == 200)
    if status == 200:
        assert response.json()["last_heartbeat_at"]


def test_the_jobs_token_and_anonymous(running, personas, api):
    url = f"/api/v1/workloads/{running.pk}/heartbeat/"
    assert api().post(url).status_code in {401, 403}
    response = api(token=personas.token_a_raw).post(url)  # tenant A's member token, as the job carries it
    assert response.status_code == 200
    beat = Workload.objects.get(pk=running.pk).last_heartbeat_at
    assert api(token=personas.token_a_raw).get(f"/api/v1/workloads/{running.pk}/").json()["last_heartbeat_at"]
    assert beat is not None
    assert not AuditEvent.objects.filter(action__contains="heartbeat").exists()  # not a state change: not audited


def test_an_ended_job_does_not_beat(running, personas, api):
    Workload.objects.filter(pk=running.pk).update(state="succeeded")
    response = api(fresh(personas.member_a)).post(f"/api/v1/workloads/{running.pk}/heartbeat/")
    assert response.status_code == 409 and response.json()["code"] == "not_running"
