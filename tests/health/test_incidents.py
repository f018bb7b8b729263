"""Incident transitions: the state machine, reasons, permissions, audit; and notifications over real HTTP and mail."""

import pytest
from django.core import mail

from apps.audit.models import AuditEvent
from apps.core.errors import Conflict, Forbidden, InvalidInput
from apps.health.models import Incident
from apps.health.services.incidents import transition_incident
from apps.notifications.models import Notification, NotificationChannel
from apps.notifications.services import send_notification
from apps.workloads.services import reconcile_workloads, submit_workload
from tests.health.conftest import cycle, inject, training_spec
from tests.health.http_helpers import serve
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def incident(fleet):
    cycle(fleet["cluster"])
    inject(fleet["cluster"], "gpu-0001", "thermal", 0)  # warning / alert: stays detected
    cycle(fleet["cluster"])
    return Incident.objects.get()


def test_the_full_path_each_step_audited(incident, personas):
    oncall = fresh(personas.oncall)
    path = ["isolating", "isolated", "draining", "drained", "repairing", "validating", "resolved"]
    for state in path:
        incident = transition_incident(oncall, incident, state, f"step to {state}")
    assert incident.state == "resolved" and incident.closed_at and incident.allowed_transitions() == []
    events = AuditEvent.objects.filter(action="incident.transition").order_by("id")
    assert [e.after["state"] for e in events] == path and all(e.actor_label == "oncall" for e in events)
    timeline = incident.events.filter(kind="transition").order_by("id")
    assert [(e.from_state, e.to_state) for e in timeline][:2] == [("detected", "isolating"), ("isolating", "isolated")]


def test_refusals(incident, personas):
    oncall = fresh(personas.oncall)
    with pytest.raises(Conflict) as skip:
        transition_incident(oncall, incident, "drained", "skip ahead")
    assert "it can go to isolating, resolved, false-positive, not drained" in skip.value.message
    with pytest.raises(InvalidInput):
        transition_incident(oncall, incident, "isolating", "  ")
    with pytest.raises(Forbidden):
        transition_incident(fresh(personas.member_a), incident, "isolating", "I am not on call")
    incident = transition_incident(oncall, incident, "false-positive", "the sensor was miscalibrated")
    with pytest.raises(Conflict):
        transition_incident(oncall, incident, "isolating", "reopen")
    assert AuditEvent.objects.filter(action="incident.transition").count() == 1


def test_webhook_and_email_reach_oncall_and_owners(fleet, personas, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=training_spec())
    reconcile_workloads()
    workload.refresh_from_db()
    node = workload.placements[0]["node"]
    personas.member_a.email = "member-a@example.com"
    personas.member_a.save(update_fields=["email"])
    cycle(fleet["cluster"])
    with serve({"POST /team-hook": (200, "ok")}) as server:
        NotificationChannel.objects.create(kind="webhook", target=server.url + "/oncall-hook")
        NotificationChannel.objects.create(kind="email", target="oncall@example.com")
        NotificationChannel.objects.create(tenant=personas.a, kind="webhook", target=server.url + "/team-hook")
        NotificationChannel.objects.create(tenant=personas.b, kind="email", target="b@example.com")  # not affected
        inject(fleet["cluster"], node, "thermal", 0)
        with django_capture_on_commit_callbacks(execute=True):
            cycle(fleet["cluster"])
        received = {path: (ctype, body) for path, ctype, body in server.received}
    assert set(received) == {"/oncall-hook", "/team-hook"}
    ctype, body = received["/oncall-hook"]
    assert ctype == "application/json" and body["text"].startswith("[WARNING] Thermal slowdown")
    assert (
        body["blocks"][1]["type"] == "section"
        and "DCGM_FI_DEV_CLOCKS_EVENT_REASONS = 0x" in body["blocks"][1]["text"]["text"]
    )
    assert sorted(m.to[0] for m in mail.outbox) == ["member-a@example.com", "oncall@example.com"]
    assert Notification.objects.filter(status="sent").count() == 4


def test_a_failing_webhook_is_retried_then_reported(incident):
    with serve({"POST /hook": (500, "down")}) as server:
        note = Notification.objects.create(
            incident_id=incident.pk,
            kind="webhook",
            target=server.url + "/hook",
            audience="on-call",
            subject="s",
            text="t",
        )
        outcomes = [send_notification(note.pk) for _ in range(Notification.MAX_ATTEMPTS + 1)]
        assert len(server.received) == Notification.MAX_ATTEMPTS
    assert outcomes == ["retry"] * (Notification.MAX_ATTEMPTS - 1) + ["failed", "skipped"]
    note.refresh_from_db()
    assert note.status == "failed" and "500" in note.last_error


def test_an_incident_deleted_takes_its_notifications_along(incident):
    """Notifications keep the incident's id (their app sits below health), and still go with the incident."""
    kept = Notification.objects.create(kind="email", target="a@example.com", audience="on-call", subject="s", text="t")
    Notification.objects.create(
        incident_id=incident.pk, kind="email", target="b@example.com", audience="on-call", subject="s", text="t"
    )
    incident.node.cluster.delete()  # nodes, their incidents and those incidents' notifications
    assert list(Notification.objects.all()) == [kept]


def test_recorded_findings_notify_nobody(fleet, personas, django_capture_on_commit_callbacks):
    NotificationChannel.objects.create(kind="email", target="oncall@example.com")
    cycle(fleet["cluster"])
    from apps.health.services.rulesets import tune_rule

    tune_rule(fresh(personas.platform_admin), "thermal-slowdown", action="record", severity="info")
    inject(fleet["cluster"], "gpu-0001", "thermal", 0)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(fleet["cluster"])
    assert Incident.objects.get().action == "record" and not mail.outbox
