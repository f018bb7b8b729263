"""Rates, statements, subtree roll-up, exports, visibility and closing, on records metered from backend usage."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.backends.types import UsageRecord as BackendUsage
from apps.chargeback import services as chargeback
from apps.chargeback.exports import to_csv
from apps.chargeback.metering import build_records
from apps.chargeback.models import Period, Statement, UsageDay, UsageRecord
from apps.chargeback.periods import month_start, next_month
from apps.chargeback.rollup import add_to_rollup
from apps.chargeback.statements import compute_statements
from apps.core.errors import Conflict, Forbidden, InvalidInput
from tests.utils.personas import fresh


def last_month() -> datetime:
    return month_start(month_start(timezone.now()) - timedelta(days=1))


def ingest(cluster, usage: list[BackendUsage]) -> list[UsageRecord]:
    """What metering does with a backend's answer, for records whose times the test chooses."""
    rows = build_records(cluster, usage, min(u.start for u in usage))
    with transaction.atomic():
        created = UsageRecord.objects.bulk_create(rows)
        add_to_rollup(rows)
    return created


def rollup_matches_records() -> bool:
    """The per-day rollup holds exactly the records' sums, per day and statement key."""
    keys = ("cluster_id", "tenant_id", "queue_id", "tier_id", "gpu_model_id", "rate_card_id")
    records = defaultdict(Decimal)
    for row in UsageRecord.objects.values(*keys, "start", "gpu_seconds"):
        records[(*[row[k] for k in keys], row["start"].date())] += row["gpu_seconds"]
    days = {
        (*[row[k] for k in keys], row["day"]): row["gpu_seconds"]
        for row in UsageDay.objects.values(*keys, "day", "gpu_seconds")
    }
    return bool(records) and dict(records) == days


def usage(tenant, queue, model, gpus, start, hours, name="job") -> BackendUsage:
    return BackendUsage(name, tenant, queue, model, gpus, start, start + timedelta(hours=hours))


def metered_to(cluster, until: datetime) -> None:
    from apps.chargeback.models import MeterWatermark

    MeterWatermark.objects.update_or_create(cluster=cluster, defaults={"metered_until": until})


def test_a_mid_month_rate_change_applies_from_its_effective_time(fleet):
    cluster, admin, h100 = fleet["cluster"], fleet["admin"], fleet["models"]["h100"]
    start = last_month() + timedelta(days=10)
    ingest(cluster, [usage("a-team", "train", "h100", 8, start, 10)])
    change = start + timedelta(hours=4)  # after the usage was metered: it is split and repriced
    chargeback.set_rate(admin, gpu_model=h100, rate="3.10", effective_from=change, note="new contract")
    records = list(UsageRecord.objects.order_by("start"))
    assert [r.end for r in records][:-1] == [r.start for r in records][1:] and change in [r.start for r in records]
    assert {(r.start < change, r.rate_card.rate) for r in records} == {(True, Decimal("2.5")), (False, Decimal("3.1"))}
    assert rollup_matches_records()
    (statement,) = compute_statements(Period.objects.get(start=last_month()), [fleet["queues"]["a-team"].tenant])
    assert statement.gpu_hours == Decimal(80)
    assert statement.usage_amount == Decimal("8") * 4 * Decimal("2.50") + Decimal("8") * 6 * Decimal("3.10")
    # The history stays: both cards exist, and a tier-specific card beats the default for its tier only.
    assert h100.pk and chargeback.RateCard.objects.filter(gpu_model=h100).count() == 2


def test_a_tier_card_prices_only_its_tier(fleet, personas):
    from apps.tenancy.models import PriorityTier

    cluster, admin = fleet["cluster"], fleet["admin"]
    start = last_month() + timedelta(days=2)
    exploratory = PriorityTier.objects.get(name="exploratory")
    chargeback.set_rate(admin, gpu_model=fleet["models"]["h100"], tier=exploratory, rate="1.00", effective_from=start)
    rows = build_records(cluster, [usage("a-team", "train", "h100", 2, start, 1)], start)
    rows[0].tier = exploratory
    assert rows[0].rate_card.rate == Decimal("2.5")  # unmapped usage has no tier: the default card
    from apps.chargeback.rates import RateBook

    book = RateBook()
    assert book.card_for(fleet["models"]["h100"].pk, exploratory.pk, start).rate == Decimal("1")
    assert book.card_for(fleet["models"]["h100"].pk, exploratory.pk, start - timedelta(seconds=1)).rate == Decimal(
        "2.5"
    )


def test_statement_rolls_up_subtenants_and_csv_matches_to_the_cent(fleet, personas):
    cluster = fleet["cluster"]
    start = last_month() + timedelta(days=3, hours=5)
    ingest(
        cluster,
        [
            usage("a", "train", "h100", 1, start, 7.3333, name="a1"),
            usage("a-team", "train", "h100", Decimal(1) / 7 * 3, start, 13.77, name="t1"),
            usage("a-team", "train", "a100", 3, start, 1.01, name="t2"),
            usage("b", "train", "a100", 5, start, 2, name="b1"),
        ],
    )
    period = Period.objects.get(start=last_month())
    metered_to(cluster, next_month(period.start))
    chargeback.close_period(fleet["admin"], period, reason="month end")
    a = Statement.objects.get(period=period, tenant=personas.a)
    team = Statement.objects.get(period=period, tenant=personas.a_team)
    b = Statement.objects.get(period=period, tenant=personas.b)
    assert a.total == team.total + sum(line.amount for line in a.lines.filter(source_tenant=personas.a))
    assert {line.source_tenant.slug for line in a.lines.all()} == {"a", "a-team"}
    assert {line.source_tenant.slug for line in b.lines.all()} == {"b"}
    for statement in (a, team, b):
        rows = list(csv.DictReader(io.StringIO(to_csv(statement))))
        *lines, total = rows
        assert total["kind"] == "total" and Decimal(total["amount"]) == statement.total
        assert sum(Decimal(row["amount"]) for row in lines) == statement.total
        assert all(Decimal(row["amount"]) == Decimal(row["amount"]).quantize(Decimal("0.01")) for row in lines)
    assert AuditEvent.objects.filter(action="chargeback.period.close", reason="month end").count() == 1


def test_closing_needs_usage_metered_to_the_end_and_an_admin(fleet, personas):
    cluster = fleet["cluster"]
    start = last_month() + timedelta(days=1)
    ingest(cluster, [usage("a", "train", "h100", 1, start, 1)])
    period = Period.objects.get(start=last_month())
    metered_to(cluster, start + timedelta(hours=2))
    with pytest.raises(Conflict, match="not metered to its end on sim"):
        chargeback.close_period(fleet["admin"], period)
    metered_to(cluster, next_month(period.start))
    with pytest.raises(Forbidden):
        chargeback.close_period(fresh(personas.tenant_admin_a), period)
    chargeback.close_period(fleet["admin"], period)
    with pytest.raises(Forbidden):
        chargeback.reopen_period(fresh(personas.tenant_admin_a), period, reason="typo")
    with pytest.raises(InvalidInput):
        chargeback.reopen_period(fleet["admin"], period, reason=" ")
    chargeback.reopen_period(fleet["admin"], period, reason="late Slurm accounting for sim")
    assert not Period.objects.get(pk=period.pk).is_closed
    event = AuditEvent.objects.get(action="chargeback.period.reopen")
    assert event.reason == "late Slurm accounting for sim" and event.actor == fleet["admin"]


def test_api_statements_are_scoped_to_the_callers_subtree(fleet, personas, api):
    cluster = fleet["cluster"]
    start = last_month() + timedelta(days=1)
    ingest(cluster, [usage(slug, "train", "h100", 1, start, 2, name=slug) for slug in ("a", "a-team", "b")])
    period = Period.objects.get(start=last_month())
    metered_to(cluster, next_month(period.start))
    response = api(fresh(personas.platform_admin)).post(f"/api/v1/periods/{period.pk}/close/", {}, format="json")
    assert response.status_code == 200, response.json()

    def seen(user) -> set[str]:
        body = api(fresh(user)).get(f"/api/v1/statements/?period={period.label}").json()
        return {row["tenant"] for row in body["results"]}

    assert seen(personas.platform_admin) == {"a", "a-team", "b"}
    assert seen(personas.tenant_admin_a) == {"a", "a-team"}  # their subtree
    assert seen(personas.member_b) == {"b"}
    b_statement = Statement.objects.get(tenant=personas.b)
    assert api(fresh(personas.tenant_admin_a)).get(f"/api/v1/statements/{b_statement.pk}/").status_code == 404
    assert api(fresh(personas.tenant_admin_a)).get(f"/api/v1/statements/{b_statement.pk}/csv/").status_code == 404
    detail = api(fresh(personas.member_b)).get(f"/api/v1/statements/{b_statement.pk}/").json()
    assert detail["totals"]["total"] == "5.00" and detail["lines"][0]["rate_per_gpu_hour"] == "2.500000"
    exported = api(fresh(personas.member_b)).get(f"/api/v1/statements/{b_statement.pk}/csv/")
    assert exported["Content-Type"].startswith("text/csv") and exported.content.decode().splitlines()[-1].count("5.00")
    # Only platform admins close or reopen.
    denied = api(fresh(personas.tenant_admin_a)).post(
        f"/api/v1/periods/{period.pk}/reopen/", {"reason": "x"}, format="json"
    )
    assert denied.status_code == 403


def test_rate_card_api_validates_and_keeps_history(fleet, personas, api):
    admin = api(fresh(personas.platform_admin))
    bad = admin.post(
        "/api/v1/rate-cards/", {"gpu_model": "h100", "rate": "-1", "effective_from": "2030-01-01T00:00Z"}, format="json"
    )
    assert bad.status_code == 400
    good = admin.post(
        "/api/v1/rate-cards/",
        {"gpu_model": "h100", "rate": "2.75", "effective_from": "2030-01-01T00:00Z"},
        format="json",
    )
    assert good.status_code == 201, good.json()
    assert good.json()["rate"] == "2.750000" and good.json()["currency"] == "USD"
    history = admin.get("/api/v1/rate-cards/?gpu_model__code=h100").json()["results"]
    assert [row["rate"] for row in history] == ["2.750000", "2.500000"]
    denied = api(fresh(personas.tenant_admin_a)).post(
        "/api/v1/rate-cards/",
        {"gpu_model": "h100", "rate": "0.01", "effective_from": "2030-02-01T00:00Z"},
        format="json",
    )
    assert denied.status_code == 403
