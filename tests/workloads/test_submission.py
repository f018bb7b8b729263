"""Submission end to end on the simulator: idempotency, admission, the outbox, reconcile, cancel, crash safety."""

import json
from contextlib import nullcontext
from datetime import timedelta
from unittest import mock

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.backends.models import SimWorkload
from apps.workloads import services
from apps.workloads.models import OutboxEntry, OutboxStatus, Workload
from apps.workloads.services import outbox
from apps.workloads.submission_context import catalog
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec


def post(api, user, spec, key=None, kind="training"):
    client = api(fresh(user))
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post("/api/v1/workloads/", {"kind": kind, "spec": spec}, format="json", **headers)


def test_same_idempotency_key_makes_one_workload(fleet, personas, api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        first = post(api, personas.member_a, training_spec(), key="ci-run-1")
    assert first.status_code == 201, first.json()
    again = post(api, personas.member_a, training_spec(), key="ci-run-1")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    assert Workload.objects.count() == 1 and SimWorkload.objects.count() == 1
    other = post(api, personas.member_a, training_spec(args=["--epochs", "2"]), key="ci-run-1")
    assert other.status_code == 409 and other.json()["code"] == "idempotency_conflict"
    assert AuditEvent.objects.filter(action="workload.submit").count() == 1


def test_submitted_work_runs_on_the_simulator(fleet, personas, api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, personas.member_a, training_spec(), key="k")
    workload = Workload.objects.get(pk=response.json()["id"])
    assert workload.backend_name.startswith(f"wl{workload.pk}-")
    services.reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running" and workload.placements and workload.started_at
    assert any(e.kind == "backend" for e in workload.events.all())


def test_pending_when_over_quota_then_dispatched(fleet, personas, api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post(api, personas.member_a, training_spec(name="first", workers=2), key="a")
        waiting = post(api, personas.member_a, training_spec(name="second"), key="b").json()
    assert waiting["state"] == "pending" and "free within guarantee" in waiting["state_reason"]
    first = Workload.objects.get(name="first")
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_workload(fresh(personas.member_a), first)
    services.tick()
    second = Workload.objects.get(name="second")
    assert second.state in {"admitted", "running"}, second.state_reason


def test_bad_specs_are_400_with_the_field(fleet, personas, api):
    cases = [
        (training_spec(name="Not_DNS"), "name"),
        (training_spec(gpus_per_worker=9), "gpus_per_worker"),
        (training_spec(image="bad image!"), "image"),
        (training_spec(sharing="mig", mig_profile="9g.99gb", gpus_per_worker=1), "mig_profile"),
        (training_spec(colour="red"), "colour"),
    ]
    for spec, field in cases:
        response = post(api, personas.member_a, spec)
        assert response.status_code == 400, (field, response.json())
        assert any(field in key for key in response.json()["fields"]), (field, response.json()["fields"])
    assert not Workload.objects.exists()
    assert post(api, personas.member_a, training_spec(queue="nope")).status_code == 400


def test_a_spec_naming_no_tenant_is_a_400_saying_the_field_is_required(fleet, personas, api):
    """Not "No tenant None." (404): the missing field is the spec's error, reported with the others."""
    spec = training_spec(gpus_per_worker=9)
    del spec["tenant"]
    response = post(api, personas.member_a, spec)
    assert response.status_code == 400, response.json()
    assert response.json()["fields"]["tenant"] == ["this field is required"]
    assert "gpus_per_worker" in response.json()["fields"]
    assert not Workload.objects.exists()


def test_cross_tenant_submit_and_read(fleet, personas, api, django_capture_on_commit_callbacks):
    assert post(api, personas.member_b, training_spec()).status_code == 404  # tenant a does not exist for b
    assert post(api, personas.viewer_a, training_spec()).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        created = post(api, personas.member_a, training_spec()).json()
    assert api(fresh(personas.member_b)).get(f"/api/v1/workloads/{created['id']}/").status_code == 404
    assert (
        api(fresh(personas.member_b)).post(f"/api/v1/workloads/{created['id']}/cancel/", {}, format="json").status_code
        == 404
    )


def test_cancel_in_any_state(fleet, personas, api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        running = post(api, personas.member_a, training_spec(name="r"), key="r").json()
    client = api(fresh(personas.member_a))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/v1/workloads/{running['id']}/cancel/", {"reason": "wrong data"}, format="json")
    assert response.status_code == 200
    workload = Workload.objects.get(pk=running["id"])
    assert workload.state == "cancelled" and workload.admission.state == "released"
    assert SimWorkload.objects.get(name=workload.backend_name).state == "cancelled"
    again = client.post(f"/api/v1/workloads/{running['id']}/cancel/", {}, format="json")
    assert again.status_code == 200 and again.json()["state"] == "cancelled"
    assert AuditEvent.objects.filter(action="workload.cancel").count() == 1


def test_worker_killed_after_commit_loses_nothing_and_duplicates_nothing(fleet, personas, api):
    # The task is never sent: as if the process died right after the commit.
    with mock.patch("apps.workloads.tasks.process_outbox_task.delay"):
        created = post(api, personas.member_a, training_spec(), key="crash").json()
    entry = OutboxEntry.objects.get(workload_id=created["id"])
    assert entry.status == OutboxStatus.PENDING and not SimWorkload.objects.exists()
    # A worker claims it, submits to the backend, and dies before recording success.
    assert outbox._claim_entry(entry.pk)
    workload = Workload.objects.get(pk=created["id"])
    from apps.backends.registry import get_backend
    from apps.workloads.specs import parse_spec, to_backend_spec

    backend_spec = to_backend_spec(parse_spec("training", workload.spec, catalog()), workload.tier.value)
    backend_spec.name = workload.backend_name
    get_backend(workload.cluster).submit(backend_spec)
    # The lease runs out; the sweep picks the entry up again and finishes it without a second job.
    OutboxEntry.objects.filter(pk=entry.pk).update(claimed_at=timezone.now() - timedelta(minutes=10))
    assert services.drain_outbox() == 1
    entry.refresh_from_db()
    assert entry.status == OutboxStatus.DONE
    assert SimWorkload.objects.filter(name=workload.backend_name).count() == 1
    assert SimWorkload.objects.count() == 1


def test_retryable_backend_error_backs_off_permanent_fails(fleet, personas, api):
    from apps.backends.base import PermanentBackendError, RetryableBackendError

    with mock.patch("apps.workloads.tasks.process_outbox_task.delay"):
        a = post(api, personas.member_a, training_spec(name="a", gpus_per_worker=4), key="a").json()
        b = post(api, personas.member_a, training_spec(name="b", gpus_per_worker=4), key="b").json()
    entry_a = OutboxEntry.objects.get(workload_id=a["id"])
    entry_b = OutboxEntry.objects.get(workload_id=b["id"])
    with mock.patch(
        "apps.backends.simulator.backend.SimulatorBackend.submit",
        side_effect=RetryableBackendError("apiserver timeout"),
    ):
        assert services.process_outbox_entry(entry_a.pk) == "retry"
    entry_a.refresh_from_db()
    assert entry_a.status == OutboxStatus.PENDING and entry_a.attempts == 1 and entry_a.next_attempt_at > timezone.now()
    assert services.process_outbox_entry(entry_a.pk) == "skipped"  # not due yet
    with mock.patch(
        "apps.backends.simulator.backend.SimulatorBackend.submit",
        side_effect=PermanentBackendError("admission webhook denied: bad image"),
    ):
        assert services.process_outbox_entry(entry_b.pk) == "failed"
    workload = Workload.objects.get(pk=b["id"])
    assert workload.state == "failed" and "bad image" in workload.state_reason
    assert workload.admission.state == "released"


def test_templates_versioned_and_submit_with_overrides(fleet, personas, api, django_capture_on_commit_callbacks):
    client = api(fresh(personas.tenant_admin_a))
    spec = training_spec()
    del spec["tenant"]
    v1 = client.post(
        "/api/v1/templates/",
        {"tenant": "a", "name": "8xH100 pretrain", "kind": "training", "spec": spec},
        format="json",
    )
    assert v1.status_code == 201 and v1.json()["version"] == 1
    v2 = client.post(
        "/api/v1/templates/",
        {"tenant": "a", "name": "8xH100 pretrain", "kind": "training", "spec": {**spec, "max_runtime_s": 7200}},
        format="json",
    )
    assert v2.json()["version"] == 2
    with django_capture_on_commit_callbacks(execute=True):
        submitted = api(fresh(personas.member_a)).post(
            f"/api/v1/templates/{v2.json()['id']}/submit/",
            {"overrides": {"name": "from-template"}},
            format="json",
            HTTP_IDEMPOTENCY_KEY="tpl-1",
        )
    assert submitted.status_code == 201, submitted.json()
    assert submitted.json()["spec"]["max_runtime_s"] == 7200 and submitted.json()["name"] == "from-template"
    assert api(fresh(personas.member_b)).get(f"/api/v1/templates/{v1.json()['id']}/").status_code == 404
    bad = client.post(
        "/api/v1/templates/",
        {"tenant": "a", "name": "x", "kind": "training", "spec": {**spec, "workers": 0}},
        format="json",
    )
    assert bad.status_code == 400


def test_workload_pages(fleet, personas, client, django_capture_on_commit_callbacks):
    client.force_login(personas.member_a)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("workloads:workload_submit"),
            {"kind": "training", "spec": __import__("json").dumps(training_spec())},
        )
    assert response.status_code == 302
    workload = Workload.objects.get()
    detail = client.get(reverse("workloads:workload_detail", args=[workload.pk])).content.decode()
    assert 'data-testid="workload-rendered"' in detail and "torchrun" in detail
    assert client.get(reverse("workloads:workload_list")).status_code == 200
    bad = client.post(reverse("workloads:workload_submit"), {"kind": "training", "spec": "{not json"})
    assert bad.status_code == 400 and "Not valid JSON" in bad.content.decode()


def test_reclaim_plan_is_carried_out_on_the_simulator(fleet, personas, api, django_capture_on_commit_callbacks):
    """A lender wants its guarantee back: the borrowing job is preempted in the backend and requeued."""
    from apps.tenancy import services as tenancy
    from apps.tenancy.models import QueueBinding

    admin = fresh(personas.platform_admin)
    lender = tenancy.create_queue(admin, tenant=personas.a, name="serve")
    QueueBinding.objects.create(queue=lender, cluster=fleet["cluster"], namespaces=["a-serve"])
    tenancy.set_quota(admin, queue=fleet["queue"], gpu_model=fleet["h100"], guaranteed=8)
    tenancy.set_quota(admin, queue=lender, gpu_model=fleet["h100"], guaranteed=8)
    tenancy.set_quota(admin, queue=fleet["queue"], gpu_model=fleet["h100"], guaranteed=8, borrow_limit=8)
    with django_capture_on_commit_callbacks(execute=True):
        borrower = post(api, personas.member_a, training_spec(name="borrower", workers=2, retries=1), key="b").json()
    assert borrower["admission"]["decision"] == "borrow"
    with django_capture_on_commit_callbacks(execute=True):
        owner = post(api, personas.member_a, training_spec(name="owner", queue="serve"), key="o").json()
    assert owner["state"] == "pending" and owner["admission"]["decision"] == "reclaim"
    with django_capture_on_commit_callbacks(execute=True):
        services.tick()  # plans are carried out: the borrower is preempted (and requeued: it allows one retry)
    with django_capture_on_commit_callbacks(execute=True):
        services.tick()  # the owner is admitted on the next pass and submitted
    victim = Workload.objects.get(pk=borrower["id"])
    assert victim.requeues == 1 and victim.state == "pending", [e.kind for e in victim.events.all()]
    assert SimWorkload.objects.get(name=f"wl{victim.pk}-borrower").state == "cancelled"
    # The rerun gets its own backend name: resubmitting the old one would return the cancelled job.
    assert victim.backend_name == f"wl{victim.pk}r1-borrower"
    assert any(e.kind == "preempt" for e in victim.events.all())
    # The requeue is audited, as every requeue is: by the system, once.
    requeues = AuditEvent.objects.filter(action="workload.requeue", target_id=str(victim.pk))
    assert list(requeues.values_list("actor_label", flat=True)) == ["system"]
    assert Workload.objects.get(pk=owner["id"]).state in {"admitted", "running"}


@pytest.mark.parametrize(
    "failing",
    [
        "insert_rows_if_locked",  # decided within the guarantee by PostgreSQL (apps/tenancy/within_guarantee.py)
        "insert_rows",  # decided by the engine (the guard cannot decide it here: see `within_guarantee`)
    ],
)
def test_a_claim_left_by_a_failed_submission_is_released(fleet, personas, api, failing):
    """The claim commits with the workload or not at all; a claim whose workload never got written is freed."""
    from apps.tenancy.models import Admission, PriorityTier

    module = "apps.workloads.services.submission"
    with (
        mock.patch(f"{module}.{failing}", side_effect=RuntimeError("disk full")),
        mock.patch(f"{module}.within_guarantee", return_value=None) if failing == "insert_rows" else nullcontext(),
    ):
        with pytest.raises(RuntimeError):
            services.submit_workload(fresh(personas.member_a), kind="training", spec=training_spec())
    assert not Workload.objects.exists() and not Admission.objects.exists() and not OutboxEntry.objects.exists()
    # A process that died between a requeue's new claim and linking it leaves an admitted claim: the sweep frees it.
    orphan = Admission.objects.create(
        name="workload:a/ghost",
        queue=fleet["queue"],
        gpu_model=fleet["h100"],
        gpus=8,
        tier=PriorityTier.objects.get(name="training"),
        state="admitted",
        submitted_at=timezone.now() - timedelta(minutes=10),
    )
    assert services.release_orphan_claims() == 1
    orphan.refresh_from_db()
    assert orphan.state == "released"


def test_the_submission_response_is_the_serializers_short_form(fleet, personas):
    from rest_framework.renderers import JSONRenderer

    from apps.workloads.api.serializers import WorkloadSerializer, short_form

    def as_json(data) -> dict:
        return json.loads(JSONRenderer().render(data))

    member = fresh(personas.member_a)
    states = []
    for name, extra, key in (
        ("fits", {"workers": 2}, "k1"),
        ("waits", {}, "k2"),
        ("nope", {"gpu_model": "a100"}, "k3"),
        ("fits", {"workers": 2}, "k1"),  # a replay: the workload as read back from the database
    ):
        workload, _ = services.submit_workload(
            member, kind="training", spec=training_spec(name=name, **extra), idempotency_key=key
        )
        assert as_json(short_form(workload)) == as_json(WorkloadSerializer(workload).data)
        states.append(workload.state)
    assert states == ["admitted", "pending", "rejected", "admitted"]


def test_a_model_outside_the_queues_quota_is_refused_by_name(fleet, personas, api, django_capture_on_commit_callbacks):
    """The queue holds H100 quota only: an A100 request is refused, naming the queue and the model (not ids)."""
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, personas.member_a, training_spec(gpu_model="a100"), key="a100")
    body = json.dumps(response.json())
    # Admission refuses it (recorded, as every admission decision is): the workload ends rejected.
    assert response.status_code == 201 and response.json()["state"] == "rejected", body
    assert response.json()["state_reason"] == "GPU model A100-SXM4-80GB is not in queue a/train's quota", body
    assert f"queue {fleet['queue'].pk}'s" not in body
