"""The workload list refreshes itself while something on it can change; cancelling asks first and names the impact."""

import pytest
from django.urls import reverse

from apps.workloads import services
from apps.workloads.models import Workload
from tests.utils.personas import fresh
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
