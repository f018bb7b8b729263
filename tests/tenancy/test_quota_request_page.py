"""From a tenant's quota to a quota request: the page links each queue's row to the form, filled in."""

from django.urls import reverse

from apps.fleet.models import GpuModel
from apps.tenancy import services
from apps.tenancy.models import QuotaRequest
from tests.utils.personas import fresh


def test_request_more_from_the_queue_row(personas, client):
    admin = fresh(personas.platform_admin)
    h100 = GpuModel.objects.get(code="h100")
    services.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=16)
    queue = services.create_queue(admin, tenant=personas.a, name="train")
    services.set_quota(admin, queue=queue, gpu_model=h100, guaranteed=8)
    client.force_login(fresh(personas.tenant_admin_a))
    page = client.get(reverse("tenancy:tenant_detail", args=["a"])).content.decode()
    link = f"{reverse('tenancy:quota_requests')}?queue={queue.pk}&amp;gpu_model=h100"
    assert link in page and 'data-testid="request-quota"' in page
    queue_row = page[page.index('data-testid="queue-quotas"') :]
    assert '<td class="text-end">∞</td>' in queue_row  # no borrow limit: unlimited, not "inf"
    spend = client.get(reverse("chargeback:tenant_spend", args=["a"])).content.decode()
    assert "</strong> USD to date" in spend

    form = client.get(reverse("tenancy:quota_requests"), {"queue": queue.pk, "gpu_model": "h100"}).context["form"]
    assert (str(form["queue"].value()), form["gpu_model"].value()) == (str(queue.pk), "h100")
    assert not form.is_bound  # prefilled, not submitted: no errors shown
    response = client.post(
        reverse("tenancy:quota_requests"),
        {"action": "request", "queue": queue.pk, "gpu_model": "h100", "guaranteed": 12, "justification": "evals"},
    )
    assert response.status_code == 302 and QuotaRequest.objects.get().guaranteed == 12

    # Those who may only view the tenant get neither the button nor the per-queue link.
    client.force_login(fresh(personas.viewer_a))
    page = client.get(reverse("tenancy:tenant_detail", args=["a"])).content.decode()
    assert 'data-testid="request-quota"' not in page and "request more" not in page
