"""Queues, guarantee caps (budgets, to users), quotas, quota requests and admission through the services, API
and pages (PostgreSQL)."""

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.backends.shares import SHARE_UNITS
from apps.core.errors import Conflict, Forbidden, InvalidInput
from apps.fleet.models import GpuModel
from apps.tenancy import services
from apps.tenancy.models import Admission, AdmissionState, GuaranteeCap, PriorityTier, Queue, Quota, QuotaRequest
from tests.utils.personas import fresh


@pytest.fixture
def setup(personas):
    admin = fresh(personas.platform_admin)
    h100 = GpuModel.objects.get(code="h100")
    services.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=32)
    team_a = services.create_queue(admin, tenant=personas.a_team, name="train")
    org_a = services.create_queue(admin, tenant=personas.a, name="infer")
    b = services.create_queue(admin, tenant=personas.b, name="research")
    services.set_quota(admin, queue=team_a, gpu_model=h100, guaranteed=8, borrow_limit=None)
    services.set_quota(admin, queue=org_a, gpu_model=h100, guaranteed=8)
    services.set_quota(admin, queue=b, gpu_model=h100, guaranteed=16, lend_limit=8)
    tiers = {t.name: t for t in PriorityTier.objects.all()}
    return {"admin": admin, "h100": h100, "team_a": team_a, "org_a": org_a, "b": b, "tiers": tiers}


def claim(setup, queue, gpus, tier="training", name=None):
    return services.submit_admission(
        name=name or f"job-{Admission.objects.count()}",
        queue=setup[queue],
        gpu_model=setup["h100"],
        gpus=gpus,
        tier=setup["tiers"][tier],
    )


def test_seeded_tiers(db):
    tiers = list(PriorityTier.objects.values_list("name", "value", "preemptible", "may_borrow"))
    assert tiers == [
        ("online-inference", 1000, False, False),
        ("periodic", 800, True, True),
        ("training", 500, True, True),
        ("exploratory", 100, True, True),
    ]


def test_child_guarantees_must_fit_the_parent_budget(setup, personas):
    ta = fresh(personas.tenant_admin_a)
    with pytest.raises(InvalidInput) as exc:
        services.set_quota(ta, queue=setup["team_a"], gpu_model=setup["h100"], guaranteed=25)
    assert "above its budget of 32" in exc.value.message and "guaranteed" in exc.value.fields
    services.set_quota(ta, queue=setup["team_a"], gpu_model=setup["h100"], guaranteed=24)
    with pytest.raises(InvalidInput):  # a child budget above what is left of the parent's
        services.set_guarantee_cap(ta, tenant=personas.a_team, gpu_model=setup["h100"], guaranteed=40)
    services.set_guarantee_cap(ta, tenant=personas.a_team, gpu_model=setup["h100"], guaranteed=24)
    with pytest.raises(InvalidInput):  # now the child's own budget binds
        services.set_quota(ta, queue=setup["team_a"], gpu_model=setup["h100"], guaranteed=25)


def test_quota_validation_errors(setup, personas):
    admin = setup["admin"]
    with pytest.raises(InvalidInput) as exc:
        services.set_quota(admin, queue=setup["team_a"], gpu_model=setup["h100"], guaranteed=8, lend_limit=9)
    assert exc.value.fields == {"lend_limit": ["Cannot lend more than the guarantee (8)."]}
    with pytest.raises(InvalidInput) as exc:
        services.set_quota(admin, queue=setup["team_a"], gpu_model=setup["h100"], guaranteed=-1)
    assert "guaranteed" in exc.value.fields
    a100 = GpuModel.objects.get(code="a100")
    with pytest.raises(InvalidInput) as exc:
        services.set_quota(admin, queue=setup["team_a"], gpu_model=a100, guaranteed=4, borrow_limit=4)
    assert "borrow_limit" in exc.value.fields and "no other queue" in exc.value.message


def test_guarantee_caps_keep_their_api_and_audit_names(setup, personas, api):
    """The model was TenantBudget: the API still serves caps as budgets, and the trail names them as before."""
    ta = fresh(personas.tenant_admin_a)
    body = {"tenant": "a-team", "gpu_model": "h100", "guaranteed": 12}
    response = api(ta).post("/api/v1/budgets/", body, format="json")
    assert response.status_code == 201, response.json()
    cap = GuaranteeCap.objects.get(tenant=personas.a_team)
    assert response.json() == {"id": cap.pk, "tenant": "a-team", "gpu_model": "h100", "guaranteed": 12}
    assert list(personas.a_team.guarantee_caps.all()) == [cap]
    events = AuditEvent.objects.filter(action="budget.set")
    assert set(events.values_list("target_type", flat=True)) == {"tenancy.tenantbudget"}
    assert events.filter(target_id=str(cap.pk)).count() == 1
    rows = api(fresh(personas.platform_admin)).get("/api/v1/audit-events/?target_type=tenancy.tenantbudget").json()
    assert len(rows["results"]) == 2  # setup's organization cap and this one


def test_tenant_admin_needs_a_budget_and_their_own_subtree(setup, personas):
    l40s = GpuModel.objects.get(code="l40s")
    with pytest.raises(Forbidden, match="No l40s budget"):
        services.set_quota(fresh(personas.tenant_admin_a), queue=setup["team_a"], gpu_model=l40s, guaranteed=2)
    with pytest.raises(Forbidden):
        services.set_quota(fresh(personas.tenant_admin_a), queue=setup["b"], gpu_model=setup["h100"], guaranteed=2)
    with pytest.raises(Forbidden):
        services.set_quota(fresh(personas.member_a), queue=setup["org_a"], gpu_model=setup["h100"], guaranteed=2)


def test_admission_decisions_are_persisted(setup):
    first = claim(setup, "team_a", 8)
    assert first.state == AdmissionState.ADMITTED and first.decision == "admit"
    borrow = claim(setup, "team_a", 8)
    assert borrow.state == AdmissionState.ADMITTED and borrow.decision == "borrow"
    # The nearest lender: its own organization. Claims count units of 1/SHARE_UNITS GPU.
    assert borrow.borrowed_from == {str(setup["org_a"].pk): 8 * SHARE_UNITS}
    inference = claim(setup, "team_a", 1, tier="online-inference")
    assert inference.state == AdmissionState.PENDING and "never borrows" in inference.reason
    never = claim(setup, "org_a", 9, tier="online-inference")
    assert never.state == AdmissionState.REJECTED


def test_admission_pass_admits_when_gpus_come_back(setup):
    running = claim(setup, "team_a", 8)
    waiting = claim(setup, "team_a", 8, tier="online-inference")
    assert waiting.state == AdmissionState.PENDING
    services.release_admission(running)
    result = services.run_admission_pass()
    assert result["admitted"] == 1
    waiting.refresh_from_db()
    assert waiting.state == AdmissionState.ADMITTED
    assert AuditEvent.objects.filter(action="admission.pass").count() == 1


def test_reclaim_plan_recorded_for_the_lender(setup):
    borrower = claim(setup, "team_a", 16, tier="exploratory")  # 8 own + 8 borrowed from org_a
    lender_claim = claim(setup, "org_a", 8)
    assert lender_claim.decision == "reclaim" and lender_claim.state == AdmissionState.PENDING
    assert lender_claim.reclaim_plan == [[borrower.pk, 16 * SHARE_UNITS]]


def test_quota_change_that_preempts_needs_confirmation(setup, personas):
    claim(setup, "team_a", 16, name="big-run")  # borrows 8 from org_a
    admin = setup["admin"]
    with pytest.raises(Conflict) as exc:
        services.set_quota(admin, queue=setup["org_a"], gpu_model=setup["h100"], guaranteed=0)
    impact = exc.value.data["impact"]
    assert impact["preempt"][0]["name"] == "big-run" and impact["lose_borrowed"][0]["gpus"] == 8
    assert "a/team-a" not in impact["text"] and "would lose 8 borrowed GPUs" in impact["text"]
    assert Quota.objects.get(queue=setup["org_a"], gpu_model=setup["h100"]).guaranteed == 8
    quota, summary = services.set_quota(
        admin, queue=setup["org_a"], gpu_model=setup["h100"], guaranteed=0, confirm=True, reason="reassigned"
    )
    assert quota.guaranteed == 0 and summary["preempt"]


def test_quota_request_flow(setup, personas):
    ta = fresh(personas.tenant_admin_a)
    request = services.request_quota(
        ta, queue=setup["team_a"], gpu_model=setup["h100"], guaranteed=16, justification="70B pretraining next month"
    )
    with pytest.raises(Forbidden):
        services.decide_quota_request(ta, request, approve=True)
    with pytest.raises(InvalidInput):
        services.decide_quota_request(setup["admin"], request, approve=False, reason="")
    decided = services.decide_quota_request(setup["admin"], request, approve=True, granted=12, reason="12 for now")
    assert decided.state == "partial" and decided.granted == 12
    assert Quota.objects.get(queue=setup["team_a"], gpu_model=setup["h100"]).guaranteed == 12
    event = AuditEvent.objects.get(action="quota_request.partial")
    assert event.after["quota_after"]["guaranteed"] == 12 and event.reason == "12 for now"
    with pytest.raises(Conflict):
        services.decide_quota_request(setup["admin"], decided, approve=False, reason="again")


def test_quota_api_and_preview(setup, personas, api):
    client = api(fresh(personas.tenant_admin_a))
    rows = client.get("/api/v1/quotas/").json()["results"]
    assert {(r["queue"], r["guaranteed"]) for r in rows} == {("a-team/train", 8), ("a/infer", 8)}
    assert api(fresh(personas.member_b)).get("/api/v1/quotas/").json()["count"] == 1  # b's only
    preview = client.post(
        "/api/v1/admission/preview/",
        {"queue": setup["team_a"].pk, "gpu_model": "h100", "gpus": 12, "tier": "training"},
        format="json",
    ).json()
    assert preview["decision"] == "borrow" and preview["borrow"] == [{"queue": "a/infer", "gpus": 4}]
    hidden = api(fresh(personas.member_b)).post(
        "/api/v1/admission/preview/",
        {"queue": setup["team_a"].pk, "gpu_model": "h100", "gpus": 1, "tier": "training"},
        format="json",
    )
    assert hidden.status_code == 404
    claim(setup, "team_a", 16, name="big-run")
    conflict = api(setup["admin"]).post(
        "/api/v1/quotas/", {"queue": setup["org_a"].pk, "gpu_model": "h100", "guaranteed": 0}, format="json"
    )
    assert conflict.status_code == 409 and conflict.json()["code"] == "needs_confirmation"
    assert conflict.json()["detail"]["impact"]["preempt"][0]["name"] == "big-run"
    bad = api(setup["admin"]).post(
        "/api/v1/quotas/", {"queue": setup["org_a"].pk, "gpu_model": "x100", "guaranteed": 1}, format="json"
    )
    assert bad.status_code == 400 and "gpu_model" in bad.json()["fields"]


def test_quota_preview_runs_the_checks_the_change_runs(setup, personas, api, client):
    """The what-if said "nothing running is affected" for a change the real request refused: it now refuses it
    with the same error, and writes nothing."""
    body = {"queue": setup["org_a"].pk, "gpu_model": "h100", "guaranteed": 32}
    admin = api(fresh(personas.tenant_admin_a))
    preview = admin.post("/api/v1/quotas/preview/", body, format="json")
    real = admin.post("/api/v1/quotas/", body, format="json")
    assert preview.status_code == real.status_code == 400
    assert {**preview.json(), "request_id": ""} == {**real.json(), "request_id": ""}
    assert "would total 40, above its budget of 32" in preview.json()["message"]
    assert "guaranteed" in preview.json()["fields"]
    # Nothing to borrow from is refused the same way: no other queue has an A100 guarantee.
    lonely = {"queue": setup["org_a"].pk, "gpu_model": "a100", "guaranteed": 0, "borrow_limit": 4}
    refused = api(setup["admin"]).post("/api/v1/quotas/preview/", lonely, format="json")
    assert refused.status_code == 400 and "borrow_limit" in refused.json()["fields"]
    # A change within the budget still previews its impact.
    fits = admin.post("/api/v1/quotas/preview/", {**body, "guaranteed": 24}, format="json")
    assert fits.status_code == 200 and fits.json()["impact"]["text"] == "nothing running is affected"
    assert Quota.objects.get(queue=setup["org_a"], gpu_model=setup["h100"]).guaranteed == 8
    # The queue page's Preview button shows the refusal on the field.
    client.force_login(personas.tenant_admin_a)
    url = reverse("tenancy:queue_detail", args=[setup["org_a"].pk])
    page = client.post(url, {"gpu_model": "h100", "guaranteed": 32, "weight": 1, "action": "preview"})
    text = page.content.decode()
    assert page.status_code == 200 and "above its budget of 32" in text and "nothing running is affected" not in text


def test_tenant_and_queue_pages(setup, personas, client):
    claim(setup, "team_a", 16, name="big-run")
    claim(setup, "team_a", 4, tier="online-inference", name="serve-llm")
    client.force_login(personas.tenant_admin_a)
    page = client.get(reverse("tenancy:tenant_detail", args=["a"])).content.decode()
    assert 'data-testid="quota-totals"' in page and "serve-llm" in page and "never borrows" in page
    totals = page.split('data-testid="quota-totals"')[1].split("</table>")[0]
    assert totals.count("<tr>") == 2 and '<td class="text-end">32</td></tr>' in totals  # the budget column: a's cap
    queue_page = client.get(reverse("tenancy:queue_detail", args=[setup["team_a"].pk])).content.decode()
    assert "big-run" in queue_page and "8 from a/infer" in queue_page
    assert client.get(reverse("tenancy:queue_detail", args=[setup["b"].pk])).status_code == 404
    requests_page = client.post(
        reverse("tenancy:quota_requests"),
        {
            "action": "request",
            "queue": setup["team_a"].pk,
            "gpu_model": "h100",
            "guaranteed": 20,
            "justification": "more",
        },
    )
    assert requests_page.status_code == 302 and QuotaRequest.objects.count() == 1


def test_queue_api_rules(setup, personas, api):
    created = api(fresh(personas.tenant_admin_a)).post("/api/v1/queues/", {"tenant": "a", "name": "dev"}, format="json")
    assert created.status_code == 201
    assert (
        api(fresh(personas.tenant_admin_a))
        .post("/api/v1/queues/", {"tenant": "b", "name": "x"}, format="json")
        .status_code
        == 404  # B is out of the tenant admin's view: as if it did not exist
    )
    assert (
        api(fresh(personas.tenant_admin_a))
        .post("/api/v1/queues/", {"tenant": "a", "name": "Bad_Name"}, format="json")
        .status_code
        == 400
    )
    assert Queue.objects.filter(name="dev").exists()


def test_queue_page_previews_then_applies_with_confirmation(setup, personas, client):
    claim(setup, "team_a", 16, name="big-run")  # borrows 8 of org_a's guarantee
    client.force_login(personas.platform_admin)
    url = reverse("tenancy:queue_detail", args=[setup["org_a"].pk])
    data = {"gpu_model": "h100", "guaranteed": 0, "weight": 1}
    preview = client.post(url, {**data, "action": "preview"})
    assert preview.status_code == 200 and "big-run" in preview.content.decode()
    assert Quota.objects.get(queue=setup["org_a"]).guaranteed == 8
    refused = client.post(url, {**data, "action": "apply"})
    assert "Confirm to apply it" in refused.content.decode()
    assert Quota.objects.get(queue=setup["org_a"]).guaranteed == 8
    applied = client.post(url, {**data, "action": "apply", "confirm": "on", "reason": "move to b"})
    assert applied.status_code == 302 and Quota.objects.get(queue=setup["org_a"]).guaranteed == 0


def test_tiers_page_edits(setup, personas, client):
    tier = PriorityTier.objects.get(name="exploratory")
    client.force_login(personas.member_a)
    assert "Save" not in client.get(reverse("tenancy:tiers")).content.decode()
    client.post(reverse("tenancy:tiers"), {"tier": tier.pk, "value": 1, "preemptible": "on", "may_borrow": "on"})
    assert PriorityTier.objects.get(pk=tier.pk).value == 100  # refused: members cannot edit tiers
    client.force_login(personas.platform_admin)
    client.post(reverse("tenancy:tiers"), {"tier": tier.pk, "value": 150, "preemptible": "on", "may_borrow": "on"})
    assert PriorityTier.objects.get(pk=tier.pk).value == 150
    client.post(reverse("tenancy:tiers"), {"tier": tier.pk, "value": 150, "may_borrow": "on"})  # no preemptible
    assert PriorityTier.objects.get(pk=tier.pk).preemptible  # refused: a non-preemptible tier cannot borrow


def test_desired_state_of_a_cluster_renders_and_validates(setup, personas, client):
    from apps.backends.render import render
    from apps.backends.render.validate import validate_objects
    from apps.fleet.services import create_simulated_cluster
    from apps.tenancy.desired_state import build_desired_state

    cluster = create_simulated_cluster(None, "kube", {"nodes": 1, "models": {"h100": 1.0}})
    services.bind_queue(
        setup["admin"], setup["team_a"], cluster=cluster, namespaces=["team-a-train"], slurm_account="team_a_train"
    )
    services.bind_queue(setup["admin"], setup["b"], cluster=cluster, namespaces=["b-research"])
    state = build_desired_state(cluster)
    assert [q.full_name for q in state.queues] == ["a-team-train", "b-research"]
    assert [t.slug for t in state.tenants] == ["a", "a-team", "b"]
    result = render(state, "kubernetes")
    kinds = {obj["kind"] for obj in result.objects}
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Cohort", "WorkloadPriorityClass"} <= kinds
    assert validate_objects(result.objects) == []
    slurm = render(state, "slurm")
    assert any("GrpTRES=" in " ".join(cmd) for cmd in slurm.commands)
    client.force_login(personas.oncall)  # the whole state; a member of A would see no queue (A has none bound)
    page = client.get(reverse("fleet:cluster_desired_state", args=["kube"])).content.decode()
    assert "kind: ClusterQueue" in page and "no per-workload" in page.lower()
    client.force_login(personas.member_a)
    page = client.get(reverse("fleet:cluster_desired_state", args=["kube"])).content.decode()
    assert "b-research" not in page and "a-team-train" not in page
    detail = client.get(reverse("fleet:cluster_detail", args=["kube"])).content.decode()
    assert 'data-testid="caveats"' in detail


def test_bind_queue_rules(setup, personas):
    from apps.fleet.services import create_simulated_cluster

    cluster = create_simulated_cluster(None, "kube2", {"nodes": 1, "models": {"h100": 1.0}})
    with pytest.raises(Forbidden):
        services.bind_queue(fresh(personas.tenant_admin_a), setup["team_a"], cluster=cluster, namespaces=["x"])
    with pytest.raises(InvalidInput):
        services.bind_queue(setup["admin"], setup["team_a"], cluster=cluster, namespaces=["Bad_NS"])
    with pytest.raises(InvalidInput):
        services.bind_queue(setup["admin"], setup["team_a"], cluster=cluster, slurm_account="bad account;rm")
    services.bind_queue(setup["admin"], setup["team_a"], cluster=cluster, namespaces=["shared"])
    with pytest.raises(Conflict):
        services.bind_queue(setup["admin"], setup["b"], cluster=cluster, namespaces=["shared"])


def test_decision_snapshot_matches_the_full_snapshot(setup):
    from apps.tenancy.admission import Request, decide
    from apps.tenancy.snapshot import build_decision_snapshot, build_snapshot

    claim(setup, "team_a", 16, name="borrower")  # borrows 8 from org_a
    claim(setup, "b", 8, name="b-own")
    claim(setup, "org_a", 4, tier="exploratory", name="reclaimer")
    full, _ = build_snapshot()
    part = build_decision_snapshot("h100")
    for key, q in full.quotas.items():
        p = part.quotas[key]
        assert (p.used, p.lent, p.borrowed) == (q.used, q.lent, q.borrowed), key
    for queue in (setup["team_a"], setup["org_a"], setup["b"]):  # one queue first, the lenders on demand
        one = build_decision_snapshot("h100", queue.pk)
        assert list(one.quotas) == [(queue.pk, "h100")]
        mine, theirs = one.quotas[(queue.pk, "h100")], full.quotas[(queue.pk, "h100")]
        assert (mine.used, mine.lent) == (theirs.used, theirs.lent)
        one.lenders("h100")
        assert {k: (q.used, q.lent) for k, q in one.quotas.items()} == {
            k: (q.used, q.lent) for k, q in full.quotas.items()
        }
    request = Request(setup["org_a"].pk, "h100", 8, full.held[next(iter(full.held))].tier)
    assert decide(part, request).reclaim == decide(full, request).reclaim  # held loaded on demand


def test_desired_state_orders_tenants_parents_first_by_number():
    from apps.tenancy.desired_state import _tree_order

    assert sorted(["/10/", "/9/12/", "/9/", "/10/2/"], key=_tree_order) == ["/9/", "/9/12/", "/10/", "/10/2/"]
