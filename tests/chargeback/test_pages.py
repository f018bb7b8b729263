"""Chargeback pages: charts and waste scoped to the viewer, printable statements, periods, rates, tenant spend."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal

from django.urls import reverse

from apps.chargeback import services as chargeback
from apps.chargeback.models import Period, RateCard, SpendBudget, Statement
from apps.chargeback.periods import next_month
from tests.chargeback.test_statements import ingest, last_month, metered_to, usage
from tests.utils.personas import fresh


def _month_of_usage(fleet) -> Period:
    start = last_month()
    rows = []
    for day in range(0, 28, 3):
        at = start + timedelta(days=day, hours=2)
        rows += [
            usage("a-team", "train", "h100", 8, at, 5, name=f"t-{day}"),
            usage("a", "train", "a100", 2, at, 3, name=f"a-{day}"),
            usage("b", "train", "h100", 1, at, 9, name=f"b-{day}"),
        ]
    ingest(fleet["cluster"], rows)
    period = Period.objects.get(start=start)
    metered_to(fleet["cluster"], next_month(start))
    return period


def test_overview_charts_only_what_the_viewer_may_see(fleet, personas, client):
    period = _month_of_usage(fleet)
    client.force_login(personas.tenant_admin_a)
    page = client.get(reverse("chargeback:overview"), {"period": period.label})
    assert page.status_code == 200
    charts = page.context["charts"]
    assert {trace["name"] for trace in charts["by_tenant"]} == {"a", "a-team"}
    assert {trace["name"] for trace in charts["by_model"]} == {"h100", "a100"}
    assert {w["tenant"] for w in page.context["waste"]} == {"a", "a-team"}
    assert "vendor/plotly/plotly-cartesian.min.js" in page.content.decode()
    client.force_login(personas.member_b)
    page = client.get(reverse("chargeback:overview"), {"period": period.label})
    assert {w["tenant"] for w in page.context["waste"]} == {"b"}


def test_close_from_the_page_then_print_and_export(fleet, personas, client):
    period = _month_of_usage(fleet)
    client.force_login(personas.tenant_admin_a)
    client.post(reverse("chargeback:period_list"), {"period": period.pk, "action": "close"})
    assert not Period.objects.get(pk=period.pk).is_closed  # not theirs to close
    client.force_login(personas.platform_admin)
    response = client.post(reverse("chargeback:period_list"), {"period": period.pk, "action": "close", "reason": "eom"})
    assert response.status_code == 302 and Period.objects.get(pk=period.pk).is_closed
    statement = Statement.objects.get(period=period, tenant=personas.a)
    client.force_login(personas.tenant_admin_a)
    page = client.get(reverse("chargeback:statement_detail", args=[statement.pk]))
    assert page.status_code == 200 and f"{statement.total} USD" in page.content.decode()
    exported = client.get(reverse("chargeback:statement_detail", args=[statement.pk]), {"format": "csv"})
    *lines, total = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert sum(Decimal(r["amount"]) for r in lines) == Decimal(total["amount"]) == statement.total
    client.force_login(personas.member_b)
    assert client.get(reverse("chargeback:statement_detail", args=[statement.pk])).status_code == 404


def test_draft_statement_of_an_open_period(fleet, personas, client):
    period = _month_of_usage(fleet)
    client.force_login(personas.member_b)
    page = client.get(reverse("chargeback:statement_draft", args=["b"]), {"period": period.label})
    assert page.status_code == 200 and page.context["draft"]
    assert page.context["statement"].usage_amount == Decimal("1") * 9 * 10 * Decimal("2.50")
    assert client.get(reverse("chargeback:statement_draft", args=["a"]), {"period": period.label}).status_code == 404


def test_rate_card_editor_is_for_platform_admins(fleet, personas, client):
    client.force_login(personas.tenant_admin_a)
    page = client.get(reverse("chargeback:rate_cards"))
    assert page.status_code == 200 and page.context["form"] is None
    client.force_login(personas.platform_admin)
    response = client.post(
        reverse("chargeback:rate_cards"),
        {"gpu_model": "h100", "tier": "exploratory", "rate": "1.10", "effective_from": "2031-01-01T00:00"},
    )
    assert response.status_code == 302
    assert RateCard.objects.filter(gpu_model__code="h100").count() == 2


def test_tenant_page_shows_spend_and_takes_a_budget(fleet, personas, client):
    chargeback.set_spend_budget(fresh(personas.platform_admin), tenant=personas.a, monthly_amount="100.00")
    client.force_login(personas.tenant_admin_a)
    fragment = client.get(reverse("chargeback:tenant_spend", args=["a"]))
    assert fragment.status_code == 200 and fragment.context["form"] is None  # the org's budget is the admins'
    assert "cost-to-date" in fragment.content.decode()
    assert "chargeback:tenant_spend" not in client.get(reverse("tenancy:tenant_detail", args=["a"])).content.decode()
    response = client.post(
        reverse("chargeback:tenant_spend", args=["a-team"]), {"monthly_amount": "40", "thresholds": "50, 90"}
    )
    assert response.status_code == 302
    assert SpendBudget.objects.get(tenant=personas.a_team).thresholds == [50, 90]
