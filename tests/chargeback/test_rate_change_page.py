"""Changing a rate from its row, and statements downloaded as files (CSV and JSON)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.urls import reverse
from django.utils import timezone

from apps.chargeback import services as chargeback
from apps.chargeback.models import RateCard, Statement
from tests.chargeback.test_pages import _month_of_usage
from tests.utils.personas import fresh


def test_change_fills_the_form_from_the_newest_rate_only(fleet, personas, client):
    admin = fresh(personas.platform_admin)
    chargeback.set_rate(
        admin, gpu_model=fleet["models"]["h100"], rate="2.75", effective_from=datetime(2024, 1, 1, tzinfo=UTC)
    )
    client.force_login(admin)
    url = reverse("chargeback:rate_cards")
    page = client.get(url).content.decode()
    assert page.count('data-testid="change-rate"') == 2  # h100's newest and a100's; not h100's older one
    assert "?gpu_model=h100&amp;rate=2.750000" in page and "rate=2.500000" not in page

    response = client.get(url, {"gpu_model": "h100", "rate": "2.750000"})
    form = response.context["form"]
    assert (form["gpu_model"].value(), form["rate"].value()) == ("h100", "2.750000") and not form.is_bound
    body = response.content.decode()
    assert "New rate for h100" in body
    # Shown in the datetime-local input's own format, from the current minute.
    assert f'value="{timezone.now():%Y-%m-%dT}' in body

    saved = client.post(
        url, {"gpu_model": "h100", "rate": "3.00", "effective_from": "2025-06-01T00:00", "note": "contract"}
    )
    assert saved.status_code == 302
    assert RateCard.objects.get(note="contract").effective_from == datetime(2025, 6, 1, tzinfo=UTC)

    client.force_login(fresh(personas.tenant_admin_a))  # may read the rates, not change them
    assert 'data-testid="change-rate"' not in client.get(url).content.decode()


def test_statement_exports_are_downloads(fleet, personas, client):
    period = _month_of_usage(fleet)
    chargeback.close_period(fresh(personas.platform_admin), period)
    statement = Statement.objects.get(period=period, tenant=personas.a)
    client.force_login(fresh(personas.tenant_admin_a))
    url = reverse("chargeback:statement_detail", args=[statement.pk])
    page = client.get(url).content.decode()
    assert 'format=csv" download>' in page and 'format=json" download>' in page
    for fmt in ("csv", "json"):
        response = client.get(url, {"format": fmt})
        assert response["Content-Disposition"] == f'attachment; filename="statement-a-{period.label}.{fmt}"'
    assert client.get(url, {"format": "json"}).json()["tenant"] == "a"
