"""The workload pages: the list refreshes itself while something on it can change; cost on the detail page (live,
with fault credits); cancelling asks first, names the impact and keeps the reason; submitting from a template with its
spec shown beside the overrides; the template list."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from apps.backends.simulator.services import advance_time
from apps.chargeback import services as chargeback
from apps.chargeback.credits import settle_credits
from apps.chargeback.metering import backend_now, meter_cluster
from apps.chargeback.reports import workload_cost
from apps.workloads import services
from apps.workloads.models import Workload, WorkloadTemplate
from tests.utils.personas import fresh
from tests.utils.simulator import runs_to_the_end
from tests.workloads.conftest import training_spec

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def workload(fleet, personas):
    workload, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=training_spec())
    return workload


def test_list_polls_until_everything_shown_is_finished(workload, personas, client):
    client.force_login(fresh(personas.member_a))
    url = reverse("workloads:workload_list")
    body = client.get(url).content.decode()
    assert 'hx-trigger="every 10s"' in body and 'data-testid="workload-list"' in body
    partial = client.get(url, {"sort": "-gpus"}, **HX).content.decode()
    assert "<html" not in partial and "pretrain" in partial and 'hx-get="/workloads/?sort=-gpus"' in partial
    Workload.objects.filter(pk=workload.pk).update(state="succeeded")
    assert "hx-trigger" not in client.get(url, **HX).content.decode()


def test_cancel_opens_a_dialog_that_names_the_impact(workload, personas, client):
    client.force_login(fresh(personas.member_a))
    url = reverse("workloads:workload_detail", args=[workload.pk])
    body = client.get(url).content.decode()
    assert 'data-bs-target="#cancel-workload"' in body and 'aria-labelledby="cancel-workload-title"' in body
    assert "Cancel pretrain?" in body
    impact = body[body.index('data-testid="confirm-impact"') :].split("</p>", 1)[0]
    assert "pretrain" in impact and ("a/train" in impact or "8 × h100" in impact)
    client.post(reverse("workloads:workload_cancel", args=[workload.pk]), {"reason": "superseded"})
    workload.refresh_from_db()
    assert workload.state in {"cancelled", "cancelling"}
    # Finished: no button, and the status stops polling.
    Workload.objects.filter(pk=workload.pk).update(state="cancelled")
    finished = client.get(url).content.decode()
    assert "cancel-workload" not in finished and "hx-trigger" not in finished


def test_viewers_get_no_cancel_button(workload, personas, client):
    client.force_login(fresh(personas.viewer_a))
    body = client.get(reverse("workloads:workload_detail", args=[workload.pk])).content.decode()
    assert "pretrain" in body and "cancel-workload" not in body


def test_template_list_shows_and_exports_only_visible_templates(fleet, personas, client):
    spec = {k: v for k, v in training_spec().items() if k != "tenant"}
    template = services.save_template(
        fresh(personas.member_a), tenant=personas.a, name="pretrain-8x", kind="training", spec=spec
    )
    client.force_login(fresh(personas.member_a))
    url = reverse("workloads:template_list")
    body = client.get(url).content.decode()
    assert "pretrain-8x" in body and f'href="{reverse("workloads:workload_submit")}?template={template.pk}"' in body
    rows = b"".join(client.get(url, {"format": "csv"}).streaming_content).decode().splitlines()
    assert rows[0].startswith("Name,Version,Kind,Tenant") and rows[1].startswith("pretrain-8x,1,training,a,")
    client.force_login(fresh(personas.member_b))
    assert "pretrain-8x" not in client.get(url).content.decode()
    assert len(b"".join(client.get(url, {"format": "csv"}).streaming_content).decode().splitlines()) == 1


def _submit_from_the_page(client, capture, spec: dict) -> Workload:
    with capture(execute=True):
        response = client.post(reverse("workloads:workload_submit"), {"kind": "training", "spec": json.dumps(spec)})
    assert response.status_code == 302, response.content.decode()[:2000]
    services.reconcile_workloads()
    workload = Workload.objects.get(name=spec["name"])
    runs_to_the_end(workload)
    return workload


def test_detail_shows_the_cost_as_it_is_metered_and_drops_cancel_once_finished(
    fleet, personas, client, django_capture_on_commit_callbacks
):
    admin = fresh(personas.platform_admin)
    chargeback.set_rate(admin, gpu_model=fleet["h100"], rate="2.50", effective_from=datetime(2020, 1, 1, tzinfo=UTC))
    client.force_login(fresh(personas.member_a))
    workload = _submit_from_the_page(client, django_capture_on_commit_callbacks, training_spec(name="costly"))
    url = reverse("workloads:workload_detail", args=[workload.pk])
    page = client.get(url).content.decode()
    assert "nothing metered yet" in page and 'data-testid="cancel-form"' in page
    assert workload_cost(workload.pk) is None

    advance_time(None, fleet["cluster"], 61)  # the one-hour run ends
    assert meter_cluster(fleet["cluster"].pk).ok
    services.reconcile_workloads()
    polled = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in polled
    assert "20.00 USD" in polled and "for 8.00 GPU-hours metered" in polled  # 8 GPUs × 1 h × 2.50
    assert 'id="workload-cancel" hx-swap-oob="true"' in polled  # the watched page loses its Cancel button
    assert "hx-trigger" not in polled  # and stops polling
    page = client.get(url).content.decode()
    assert 'data-testid="cancel-form"' not in page and "hx-swap-oob" not in page
    assert workload_cost(workload.pk).total == Decimal("20.00")

    # A hardware fault's credit for the run is taken off its cost once settled.
    chargeback.credit_interruptions(
        admin,
        cluster=fleet["cluster"],
        backend_ids=[workload.backend_name],
        interrupted_at=backend_now(fleet["cluster"]),
        reason="XID 79 on GPU 3",
    )
    advance_time(None, fleet["cluster"], 2)
    assert meter_cluster(fleet["cluster"].pk).ok
    settle_credits()
    cost = workload_cost(workload.pk)
    assert (cost.amount, cost.credited_amount, cost.total) == (Decimal("20.00"), Decimal("20.00"), Decimal("0.00"))
    assert "20.00 credited for 8.00 GPU-hours lost to hardware faults" in client.get(url).content.decode()


def test_cancel_from_the_page_keeps_the_reason(fleet, personas, client, django_capture_on_commit_callbacks):
    client.force_login(fresh(personas.member_a))
    workload = _submit_from_the_page(client, django_capture_on_commit_callbacks, training_spec(name="to-cancel"))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("workloads:workload_cancel", args=[workload.pk]), {"reason": "wrong learning rate"}, follow=True
        )
    assert "Cancelling to-cancel." in response.content.decode()
    workload.refresh_from_db()
    assert workload.state in {"cancelling", "cancelled"} and workload.state_reason == "wrong learning rate"
    assert workload.events.filter(kind="cancel", message="wrong learning rate").exists()
    assert 'data-testid="cancel-form"' not in response.content.decode()


def test_a_template_fills_the_submit_form_and_is_recorded(fleet, personas, client, django_capture_on_commit_callbacks):
    spec = training_spec(name="nightly", max_runtime_s=1800)
    del spec["tenant"]
    template = services.save_template(
        fresh(personas.tenant_admin_a), tenant=personas.a, name="nightly 8xH100", kind="training", spec=spec
    )
    client.force_login(fresh(personas.member_a))
    page = client.get(reverse("workloads:workload_submit"), {"template": template.pk}).content.decode()
    assert "filled from template a/nightly 8xH100, version 1" in page
    assert 'id="f-name" aria-required="true" value="nightly"' in page and 'id="f-max_runtime_s" value="1800"' in page
    assert '<option value="a/train" selected>' in page  # the template's tenant and queue: one choice
    plain = client.get(reverse("workloads:workload_submit")).content.decode()
    assert 'data-testid="template-card"' not in plain

    # What the form posts: its fields, no JSON. A field that cannot be read comes back at its field, with the
    # template still chosen; a good one submits and records the template.
    fields = {
        "kind": "training",
        "template": template.pk,
        "mode": "fields",
        "name": "nightly-42",
        "queue": "a/train",
        "image": spec["image"],
        "command": "python\ntrain.py",
        "gpu_model": "h100",
        "gpus_per_worker": "8",
        "max_runtime_s": "1800",
    }
    bad = client.post(reverse("workloads:workload_submit"), {**fields, "workers": "two"})
    assert bad.status_code == 400
    body = bad.content.decode()
    assert 'data-errors-for="workers"><div>Not a whole number.</div>' in body
    assert "filled from template a/nightly 8xH100, version 1" in body and 'value="nightly-42"' in body
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("workloads:workload_submit"), fields)
    workload = Workload.objects.get(name="nightly-42")
    assert response.status_code == 302 and response.url == reverse("workloads:workload_detail", args=[workload.pk])
    assert workload.spec["max_runtime_s"] == 1800 and workload.tenant == personas.a
    assert workload.template == template and workload.spec["command"] == ["python", "train.py"]


def test_templates_of_other_tenants_are_not_shown(fleet, personas, client):
    spec = training_spec(name="secret")
    del spec["tenant"]
    template = services.save_template(
        fresh(personas.tenant_admin_a), tenant=personas.a, name="a-only", kind="training", spec=spec
    )
    client.force_login(fresh(personas.member_b))
    page = client.get(reverse("workloads:workload_submit"), {"template": template.pk}).content.decode()
    assert "a-only" not in page and 'data-testid="template-card"' not in page
    assert WorkloadTemplate.objects.count() == 1
