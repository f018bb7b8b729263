"""gpuc nodes cordon/drain/resume: the impact preview changes nothing; the action changes the node, audited once."""

from __future__ import annotations

import pytest

from apps.accounts import services as accounts
from apps.accounts.roles import Role
from apps.audit.models import AuditEvent
from apps.fleet.models import Node
from apps.operations.models import Operation
from apps.workloads.models import Workload
from apps.workloads.services import reconcile_workloads
from tests.cli.conftest import write_job
from tests.utils.personas import fresh
from tests.utils.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def oncall(console, gpuc):
    """gpuc as the on-call engineer, with a token of their own; and a job of tenant A running on a node."""
    person = fresh(console.personas.oncall)
    _token, raw = accounts.issue_token(person, user=person, name="laptop", role=Role.ONCALL)
    done = gpuc("submit", "-f", write_job(gpuc.home, "on-the-node", gpus_per_worker=8))
    assert done.code == 0, done
    assert wait_until(lambda: Workload.objects.filter(name="on-the-node", state="running").exists())
    reconcile_workloads()  # beat's reconcile: the cluster says where it runs
    workload = Workload.objects.get(name="on-the-node")
    gpuc.token = raw
    return Node.objects.get(cluster__name="sim", name=workload.placements[0]["node"])


def test_a_dry_run_prints_the_impact_and_changes_nothing(gpuc, oncall):
    node = oncall
    preview = gpuc("nodes", "drain", node.name, "--dry-run", "--request-id", "preview-1", "-o", "json")
    assert preview.code == 0, preview
    impact = preview.json()
    assert (impact["action"], impact["node"], impact["cluster"]) == ("drain", node.name, "sim")
    assert [(w["name"], w["tenant"], w["gpus"]) for w in impact["evicted"]] == [("on-the-node", "a", 8)]
    text = gpuc("nodes", "drain", node.name, "--dry-run")
    assert text.code == 0, text
    assert text.stdout.splitlines()[0] == f"drain {node.name} on sim: a preview, nothing was changed"
    assert "evicts 1 workload:" in text.stdout and "a/on-the-node" in text.stdout
    node.refresh_from_db()
    assert not node.unschedulable
    assert not Operation.objects.exists()
    assert not AuditEvent.objects.filter(request_id="preview-1").exists()
    assert Workload.objects.get(name="on-the-node").state == "running"


def test_cordon_with_a_reason_cordons_the_node_and_writes_one_audit_event(gpuc, oncall):
    node = oncall
    without = gpuc("nodes", "cordon", node.name)
    assert without.code == 4 and "needs --reason" in without.stderr, without
    done = gpuc("nodes", "cordon", node.name, "--reason", "XID 79 on GPU 3", "--request-id", "cordon-7", "--wait",
                "--interval", "0.2", "-o", "json")  # fmt: skip
    assert done.code == 0, done
    operation = done.json()
    assert (operation["kind"], operation["status"], operation["reason"]) == ("health.cordon", "succeeded",
                                                                          "XID 79 on GPU 3")  # fmt: skip
    node.refresh_from_db()
    assert node.unschedulable
    events = AuditEvent.objects.filter(request_id="cordon-7")
    assert [(e.action, e.reason) for e in events] == [("operation.start", "XID 79 on GPU 3")], list(events.values())
    assert Workload.objects.get(name="on-the-node").state == "running"  # a cordon evicts nothing
    # Cordoned already: the console refuses a second one (409), which is a rejection (exit 2), and starts nothing.
    again = gpuc("nodes", "cordon", str(node.pk), "--reason", "again")
    assert again.code == 2 and "already_cordoned" in again.stderr, again
    assert Operation.objects.count() == 1
    unknown = gpuc("nodes", "cordon", "gpu-9999", "--reason", "x")
    assert unknown.code == 4 and "no node named 'gpu-9999'" in unknown.stderr, unknown


def test_a_member_may_not_cordon(gpuc, oncall, console):
    gpuc.token = console.personas.token_a_raw
    denied = gpuc("nodes", "cordon", oncall.name, "--reason", "I think it is slow")
    assert denied.code == 4 and "(HTTP 403, permission_denied)" in denied.stderr, denied
    assert not Operation.objects.exists()


def test_drain_then_resume_change_the_node_and_write_one_audit_event_each(gpuc, oncall):
    node = oncall
    drained = gpuc("nodes", "drain", node.name, "--reason", "XID 48: double-bit ECC error", "--request-id", "drain-3",
                   "--wait", "--interval", "0.2", "-o", "json")  # fmt: skip
    assert drained.code == 0, drained
    operation = drained.json()
    assert (operation["kind"], operation["status"], operation["reason"]) == ("health.drain", "succeeded",
                                                                          "XID 48: double-bit ECC error")  # fmt: skip
    node.refresh_from_db()
    assert node.unschedulable
    reconcile_workloads()  # beat's reconcile: the cluster says what became of the evicted run
    evicted = Workload.objects.get(name="on-the-node")
    moved_to = {p["node"] for p in evicted.placements}
    assert moved_to and node.name not in moved_to, (evicted.state, evicted.placements)  # requeued on the other H100s
    events = AuditEvent.objects.filter(request_id="drain-3")
    assert [(e.action, e.target_type, e.target_id, e.reason) for e in events] == [
        ("operation.start", "operations.operation", str(operation["id"]), "XID 48: double-bit ECC error")
    ], list(events.values())

    resumed = gpuc("nodes", "resume", node.name, "--reason", "GPU 3 replaced, burn-in passed", "--request-id",
                   "resume-3", "--wait", "--interval", "0.2", "-o", "json")  # fmt: skip
    assert resumed.code == 0, resumed
    operation = resumed.json()
    assert (operation["kind"], operation["status"]) == ("health.resume", "succeeded"), operation
    node.refresh_from_db()
    assert not node.unschedulable
    events = AuditEvent.objects.filter(request_id="resume-3")
    assert [(e.action, e.target_id, e.reason) for e in events] == [
        ("operation.start", str(operation["id"]), "GPU 3 replaced, burn-in passed")
    ], list(events.values())
    assert list(Operation.objects.order_by("id").values_list("kind", "status")) == [
        ("health.drain", "succeeded"),
        ("health.resume", "succeeded"),
    ]
