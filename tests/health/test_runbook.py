"""Runbook actions over the API and manage.py: reason, preview, operation, conflicts, permissions, incidents."""

import pytest
from django.core.management import CommandError, call_command

from apps.audit.models import AuditEvent
from apps.fleet.models import Node
from apps.fleet.services import sync_inventory
from apps.health.models import Incident, NodeHealth
from apps.operations.models import Operation
from apps.workloads.services import reconcile_workloads, submit_workload
from tests.health.conftest import cycle, inject, training_spec
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy(fleet, personas, django_capture_on_commit_callbacks):
    """A 4-node job of tenant A running on every node (32 of its 32 guaranteed H100s)."""
    with django_capture_on_commit_callbacks(execute=True):
        workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=training_spec(workers=4))
    reconcile_workloads()
    assert sync_inventory(fleet["cluster"].pk).ok  # the fleet's counts see the job's GPUs in use
    workload.refresh_from_db()
    assert workload.state == "running"
    return {**fleet, "workload": workload, "node": Node.objects.get(name=workload.placements[0]["node"])}


def test_drain_preview_shows_evictions_guarantees_and_capacity(busy, personas, api):
    node = busy["node"]
    response = api(fresh(personas.oncall)).post(f"/api/v1/nodes/{node.pk}/drain/", {"dry_run": True}, format="json")
    assert response.status_code == 200, response.json()
    preview = response.json()
    assert [w["name"] for w in preview["evicted"]] == ["pretrain"] and preview["evicted"][0]["gpus"] == 32
    assert preview["tenants_below_guarantee"] == [
        {
            "tenant": "a",
            "queue": "train",
            "gpu_model": "h100",
            "guaranteed": 32,
            "running_now": 32.0,
            "running_after": 0.0,
        }
    ]
    h100 = next(c for c in preview["capacity_left"] if c["gpu_model"] == "H100-80GB-HBM3")
    assert h100["free_now"] == 0 and h100["free_after"] == 0 and h100["evicted_gpus_to_replace"] == 32
    assert Operation.objects.count() == 0 and AuditEvent.objects.filter(action="operation.start").count() == 0
    same = api(fresh(personas.oncall)).get(f"/api/v1/nodes/{node.pk}/impact/?action=drain").json()
    assert same["evicted"] == preview["evicted"]
    cordon = api(fresh(personas.oncall)).get(f"/api/v1/nodes/{node.pk}/impact/?action=cordon").json()
    assert cordon["evicted"] == [] and cordon["tenants_below_guarantee"] == []


def test_drain_runs_as_an_operation_and_a_second_engineer_gets_409(
    busy, personas, api, django_capture_on_commit_callbacks
):
    node = busy["node"]
    first = api(fresh(personas.oncall)).post(
        f"/api/v1/nodes/{node.pk}/drain/", {"reason": "XID storm on rack 2"}, format="json"
    )
    assert first.status_code == 202, first.json()
    operation = first.json()
    assert operation["kind"] == "health.drain" and operation["status"] == "pending"
    second = api(fresh(personas.platform_admin)).post(
        f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "me too"}, format="json"
    )
    assert second.status_code == 409
    body = second.json()
    assert body["code"] == "operation_running" and body["detail"]["operation"]["id"] == operation["id"]
    assert body["detail"]["operation"]["actor"] == "oncall"
    from apps.operations.runner import execute_operation

    execute_operation(operation["id"])
    done = Operation.objects.get(pk=operation["id"])
    assert done.status == "succeeded", done.error
    assert done.result["evicted"] == [busy["workload"].backend_name]
    # The operation's page counts what the drain did: "1 of 1 workloads evicted".
    assert (done.steps_done, done.steps_total, done.steps_label) == (1, 1, "workloads evicted")
    assert "drained" in done.log and Node.objects.get(pk=node.pk).unschedulable
    assert NodeHealth.objects.get(pk=node.pk).isolated_by == "human"
    third = api(fresh(personas.platform_admin)).post(
        f"/api/v1/nodes/{node.pk}/uncordon/", {"reason": "false alarm"}, format="json"
    )
    assert third.status_code == 202


def test_reason_and_role_are_required(busy, personas, api):
    node = busy["node"]
    missing = api(fresh(personas.oncall)).post(f"/api/v1/nodes/{node.pk}/cordon/", {}, format="json")
    assert missing.status_code == 400 and missing.json()["fields"] == {"reason": ["Required."]}
    for who in ("member_a", "viewer_a", "tenant_admin_a"):
        denied = api(fresh(personas.user(who))).post(f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "x"}, format="json")
        assert denied.status_code == 403, who
    unknown = api(fresh(personas.oncall)).post(
        f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "x", "force": 1}, format="json"
    )
    assert unknown.status_code == 400
    assert Operation.objects.count() == 0


def test_incident_walks_with_the_actions(fleet, personas, api, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    oncall = api(fresh(personas.oncall))
    cycle(cluster)
    fault = inject(cluster, "gpu-0002", "xid79", 0)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    incident = Incident.objects.get(cause="xid-79")
    node = incident.node
    assert incident.state == "isolated"
    listed = oncall.get("/api/v1/incidents/?open=true&severity=fatal").json()
    assert [i["id"] for i in listed["results"]] == [incident.pk]
    detail = oncall.get(f"/api/v1/incidents/{incident.pk}/").json()
    assert detail["evidence"][0]["text"].startswith("DCGM_FI_DEV_XID_ERRORS = 79 on GPU 0")
    assert [e["kind"] for e in detail["events"]][:2] == ["detected", "transition"]
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            oncall.post(f"/api/v1/nodes/{node.pk}/drain/", {"reason": "reboot needed"}, format="json").status_code
            == 202
        )
    assert Incident.objects.get(pk=incident.pk).state == "drained"
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            oncall.post(f"/api/v1/nodes/{node.pk}/request-reset/", {"reason": "reboot"}, format="json").status_code
            == 202
        )
    assert Incident.objects.get(pk=incident.pk).state == "repairing"
    early = oncall.post(f"/api/v1/nodes/{node.pk}/resume/", {"reason": "done?"}, format="json")
    assert early.status_code == 409 and "validating" in early.json()["message"]
    from apps.backends.simulator.services import clear_fault

    clear_fault(None, fault, "rebooted")
    moved = oncall.post(
        f"/api/v1/incidents/{incident.pk}/transition/", {"to": "validating", "reason": "rebooted"}, format="json"
    )
    assert moved.status_code == 200 and moved.json()["state"] == "validating"
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            oncall.post(f"/api/v1/nodes/{node.pk}/resume/", {"reason": "validated"}, format="json").status_code == 202
        )
    assert Incident.objects.get(pk=incident.pk).state == "resolved"
    node.refresh_from_db()
    assert not node.unschedulable and NodeHealth.objects.get(pk=node.pk).isolated_by == ""


def test_rules_sources_and_channels_api(fleet, personas, api):
    admin = api(fresh(personas.platform_admin))
    rules = admin.get("/api/v1/health-rules/").json()
    assert {r["key"] for r in rules} >= {"xid-fatal", "nvlink-crc", "pcie-replay", "exporter-down"}
    tuned = admin.patch(
        "/api/v1/health-rules/pcie-replay/", {"severity": "critical", "reason": "RMA trend"}, format="json"
    )
    assert (
        tuned.status_code == 200
        and tuned.json() | {"version": 2} == tuned.json()
        and tuned.json()["severity"] == "critical"
    )
    denied = api(fresh(personas.oncall)).patch("/api/v1/health-rules/pcie-replay/", {"severity": "info"}, format="json")
    assert denied.status_code == 403
    bad = admin.post(
        "/api/v1/telemetry-sources/", {"cluster": "hsim", "kind": "exporter", "url_pattern": "ftp://x"}, format="json"
    )
    assert bad.status_code == 400 and "url_pattern" in bad.json()["fields"]
    ok = admin.post(
        "/api/v1/telemetry-sources/",
        {"cluster": "hsim", "kind": "exporter", "url_pattern": "http://{node}:9400/metrics"},
        format="json",
    )
    assert ok.status_code == 201 and ok.json()["kind"] == "exporter"
    team = api(fresh(personas.tenant_admin_a)).post(
        "/api/v1/notification-channels/",
        {"tenant": "a", "kind": "email", "target": "team-a@example.com"},
        format="json",
    )
    assert team.status_code == 201
    oncall_channel = api(fresh(personas.tenant_admin_a)).post(
        "/api/v1/notification-channels/", {"kind": "webhook", "target": "http://hooks.example/x"}, format="json"
    )
    assert oncall_channel.status_code == 403


def test_commands_preview_and_act(busy, personas, capsys):
    node = busy["node"]
    with pytest.raises(CommandError, match="--reason is required"):
        call_command("drain", node.name, "--cluster", "hsim")
    call_command("drain", node.name, "--cluster", "hsim", "--reason", "planned maintenance", "--dry-run")
    out = capsys.readouterr().out
    assert "would evict 1 workload" in out and "a/pretrain" in out and "a/train below its guarantee" in out
    assert Operation.objects.count() == 0
    call_command("cordon", node.name, "--cluster", "hsim", "--reason", "planned maintenance", "--user", "oncall")
    out = capsys.readouterr().out
    assert "succeeded" in out and Node.objects.get(pk=node.pk).unschedulable
    operation = Operation.objects.get()
    assert operation.actor.username == "oncall" and operation.reason == "planned maintenance"
    with pytest.raises(CommandError, match="need the on-call or platform-admin role"):
        call_command("uncordon", node.name, "--cluster", "hsim", "--reason", "x", "--user", "member-a")
    call_command("mark_rma", node.name, "--cluster", "hsim", "--reason", "row remap failure confirmed")
    assert Operation.objects.filter(kind="health.mark-rma", status="succeeded").exists()


def test_a_backend_refusal_fails_the_operation_and_rolls_the_incident_back(fleet, personas):
    from django.utils import timezone

    from apps.operations.runner import execute_operation

    ghost = Node.objects.create(cluster=fleet["cluster"], name="gpu-9999")  # the inventory knows it, the backend not
    now = timezone.now()
    incident = Incident.objects.create(
        node=ghost,
        cause="xid-79",
        rule_key="xid-fatal",
        ruleset_version=1,
        title="GPU off the bus",
        severity="fatal",
        action="drain",
        detected_at=now,
        last_seen_at=now,
    )
    from apps.health.services.runbook import node_action

    operation = node_action(fresh(personas.oncall), ghost, "cordon", reason="isolate it")
    execute_operation(operation.pk)
    operation.refresh_from_db()
    assert operation.status == "failed" and "refused" in operation.error and "gpu-9999" in operation.error
    incident.refresh_from_db()
    assert incident.state == "detected"  # isolating → detected: ready for the next attempt
    assert [e.to_state for e in incident.events.filter(kind="transition")] == ["isolating", "detected"]
    assert not Node.objects.get(pk=ghost.pk).unschedulable
    assert NodeHealth.objects.get(pk=ghost.pk).isolated_by == ""


def test_a_drain_tells_the_owners_of_what_it_evicts(busy, personas, api, django_capture_on_commit_callbacks):
    """A human drain (no incident) evicts tenant A's job: A's channels and the job's submitter hear of it, with
    the node, who drained it, why and the operation; nobody else's channel does."""
    from apps.accounts.models import User
    from apps.notifications.models import Notification, NotificationChannel

    User.objects.filter(pk=personas.member_a.pk).update(email="member-a@example.com")
    NotificationChannel.objects.create(tenant=personas.a, kind="webhook", target="http://hooks.example/team-a")
    NotificationChannel.objects.create(tenant=personas.b, kind="email", target="b@example.com")
    NotificationChannel.objects.create(kind="email", target="oncall@example.com")
    node = busy["node"]
    with django_capture_on_commit_callbacks(execute=True):
        response = api(fresh(personas.oncall)).post(
            f"/api/v1/nodes/{node.pk}/drain/", {"reason": "fan failure, swap tonight"}, format="json"
        )
    assert response.status_code == 202, response.json()
    operation = Operation.objects.get(pk=response.json()["id"])
    assert operation.status == "succeeded", operation.error
    sent = list(Notification.objects.order_by("target"))
    assert [(n.target, n.audience) for n in sent] == [
        ("http://hooks.example/team-a", "owners"),
        ("member-a@example.com", "owners"),
    ]
    note = sent[0]
    assert note.subject == f"[DRAIN] {node.name} drained by oncall: 1 workload(s) of a evicted"
    assert "Evicted: a/pretrain" in note.text and "Reason: fan failure, swap tonight" in note.text
    assert f"/operations/{operation.pk}/" in note.text and note.incident_id is None
    assert "told the owners of 1 evicted workload(s)" in operation.log


def test_a_repeated_cordon_says_the_node_is_already_cordoned(busy, personas, api, django_capture_on_commit_callbacks):
    node = busy["node"]
    oncall = api(fresh(personas.oncall))
    with django_capture_on_commit_callbacks(execute=True):
        first = oncall.post(f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "fan noise"}, format="json")
    assert first.status_code == 202 and Operation.objects.get().status == "succeeded"
    again = api(fresh(personas.platform_admin)).post(
        f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "fan noise"}, format="json"
    )
    assert again.status_code == 409, again.json()
    body = again.json()
    assert body["code"] == "already_cordoned"
    assert body["message"] == (
        f"Node {node.name} is already cordoned by oncall (operation #{first.json()['id']}: fan noise); "
        "cordoning it again changes nothing."
    )
    assert body["detail"]["cordoned_by"]["id"] == first.json()["id"]
    assert Operation.objects.count() == 1 and AuditEvent.objects.filter(action="operation.start").count() == 1
    assert NodeHealth.objects.get(pk=node.pk).isolated_by == "human"
    # The node page says the same instead of starting an operation.
    from django.test import Client

    page = Client()
    page.force_login(personas.oncall)
    shown = page.post(f"/health/nodes/{node.pk}/action/", {"action": "cordon", "reason": "again"}, follow=True)
    assert f"Node {node.name} is already cordoned by oncall" in shown.content.decode()
    assert Operation.objects.count() == 1


def test_a_cordon_of_a_node_cordoned_elsewhere_is_refused_but_takes_over_automations(busy, personas, api):
    node = busy["node"]
    Node.objects.filter(pk=node.pk).update(unschedulable=True)  # cordoned with kubectl / scontrol, as inventory saw
    refused = api(fresh(personas.oncall)).post(f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "x"}, format="json")
    assert refused.status_code == 409
    assert refused.json()["message"] == (
        f"Node {node.name} is already cordoned outside the console; cordoning it again changes nothing."
    )
    NodeHealth.objects.update_or_create(node=node, defaults={"isolated_by": "human"})  # its operation pruned since
    pruned = api(fresh(personas.oncall)).post(f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "x"}, format="json")
    assert pruned.status_code == 409 and "already cordoned by a person, through the console" in pruned.json()["message"]
    assert not Operation.objects.exists()
    # Automation's cordon is another matter: a human cordon takes the node over so automation never resumes it.
    NodeHealth.objects.update_or_create(node=node, defaults={"isolated_by": "auto"})
    taken = api(fresh(personas.oncall)).post(
        f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "keep it out"}, format="json"
    )
    assert taken.status_code == 202 and NodeHealth.objects.get(pk=node.pk).isolated_by == "human"


def test_each_runbook_action_audits_its_outcome(busy, personas, api, django_capture_on_commit_callbacks):
    node = busy["node"]
    with django_capture_on_commit_callbacks(execute=True):
        response = api(fresh(personas.oncall)).post(
            f"/api/v1/nodes/{node.pk}/drain/", {"reason": "XID storm on rack 2"}, format="json"
        )
    op = response.json()["id"]
    events = list(AuditEvent.objects.filter(target_id=str(op), target_type="operations.operation").order_by("id"))
    assert [e.action for e in events] == ["operation.start", "operation.succeeded"]
    outcome = events[1]
    assert outcome.actor_label == "oncall" and outcome.reason == "XID storm on rack 2"
    assert outcome.after["kind"] == "health.drain" and outcome.after["status"] == "succeeded"
    assert outcome.after["result"]["evicted"] == [busy["workload"].backend_name]
    assert outcome.after["result"]["node"] == node.name
