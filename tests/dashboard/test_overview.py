"""The overview (home page): its numbers equal what was seeded, tenant data stays scoped, and its cost is fixed."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.chargeback.budgets import RUN_RATE_WINDOW, subtree_costs, subtree_spend
from apps.chargeback.periods import current_period
from apps.dashboard import overview
from tests.dashboard.conftest import GPUS, Seeded, cost_of, seed_fleet, seed_tenant_data
from tests.utils.personas import fresh

HOME = reverse("dashboard:home")
MODEL_NAMES = {"h100": "H100-80GB-HBM3", "a100": "A100-SXM4-80GB"}


def page(client, user) -> str:
    client.force_login(user)
    response = client.get(HOME)
    assert response.status_code == 200
    return response.content.decode()


def cell(html: str, attrs: str) -> str:
    """The text of the first element carrying `attrs` (a fragment such as 'data-state="free"')."""
    match = re.search(rf"<[^>]*{attrs}[^>]*>([^<]*)<", html)
    assert match, attrs
    return match.group(1).strip()


def row(html: str, start: str) -> str:
    """The HTML of the table row that opens with `start` (e.g. '<tr data-model="H100-80GB-HBM3">')."""
    begin = html.index(start)
    return html[begin : html.index("</tr>", begin)]


def expected_states(seeded: Seeded, code: str) -> dict[str, int]:
    nodes = [n for n in seeded.nodes if n["model"] == code]
    total = GPUS * len(nodes)
    allocated = sum(n["allocated"] for n in nodes)
    unhealthy = sum(n["unhealthy"] for n in nodes)
    free = sum(GPUS - n["unhealthy"] - n["allocated"] for n in nodes if not n["cordoned"])
    return {
        "total": total,
        "allocated": allocated,
        "free": free,
        "unhealthy": unhealthy,
        "cordoned": total - allocated - free - unhealthy,
    }


def test_gpus_by_state_fragmentation_and_health_equal_the_seeded_fleet(seeded, personas, client):
    html = page(client, personas.platform_admin)
    assert 'data-testid="overview-gpus-by-state"' in html
    for code, name in MODEL_NAMES.items():
        tr = row(html, f'<tr data-model="{name}">')
        want = expected_states(seeded, code)
        for state, n in want.items():
            assert cell(tr, f'data-state="{state}"') == f"{n:,}", (code, state)
        assert sum(want[s] for s in ("allocated", "free", "cordoned", "unhealthy")) == want["total"]
    total = row(html, '<tr class="fw-semibold" data-model="">')
    assert cell(total, 'data-state="total"') == f"{GPUS * len(seeded.nodes):,}"

    # Largest gang: whole free nodes (uncordoned, healthy, idle) within one leaf switch of one cluster.
    fragmentation = html[html.index('data-testid="overview-fragmentation"') :]
    for code, name in MODEL_NAMES.items():
        whole: dict[tuple[str, int], int] = {}
        for i, n in enumerate(seeded.nodes):
            if n["model"] == code and not n["cordoned"] and n["allocated"] == 0 and not n["unhealthy"]:
                leaf = (n["cluster"], i % 12 // 4)  # same-named switches of two clusters are two switches
                whole[leaf] = whole.get(leaf, 0) + 1
        assert f'data-gang="{max(whole.values(), default=0)}"' in row(fragmentation, f'<tr data-model="{name}">')

    assert 'data-severity="fatal" data-count="2"' in html
    assert 'data-severity="critical" data-count="2"' in html
    assert 'data-severity="warning" data-count="0"' in html  # the resolved one is not open
    isolation = re.search(r'data-testid="overview-isolation" data-used="(\d+)" data-limit="(\d+)"', html)
    assert isolation and int(isolation.group(1)) == seeded.auto_isolated
    # Default policy: at most 4 nodes and 10 % of a pool per hour, never below one: four pools of 6 nodes.
    assert int(isolation.group(2)) == 4


def test_heatmap_has_every_node_and_gpu_and_leaves_silent_exporters_out(seeded, personas, client):
    client.force_login(personas.platform_admin)
    response = client.get(HOME)
    heatmap = response.context["overview"]["heatmap"]
    assert heatmap["group"] == 1 and heatmap["columns"] == len(seeded.nodes)
    assert heatmap["x"][0] == "c-east · n000" and [c["name"] for c in heatmap["clusters"]] == ["c-east", "c-west"]
    assert heatmap["y"] == [str(g) for g in range(GPUS)]
    for c, node in enumerate(sorted(seeded.nodes, key=lambda n: (n["cluster"], n["name"]))):
        column = [heatmap["z"][g][c] for g in range(GPUS)]
        assert column == (node["util"] if node["exporter_up"] else [None] * GPUS), node["name"]
    readings = [u for n in seeded.nodes if n["exporter_up"] for u in n["util"]]
    assert heatmap["mean"] == round(sum(readings) / len(readings), 1)
    html = response.content.decode()
    assert 'data-testid="overview-heatmap"' in html and 'id="overview-heatmap-data"' in html
    assert "vendor/plotly/plotly-cartesian.min.js" in html and "js/overview.js" in html


def test_heatmap_groups_neighbouring_nodes_on_a_large_fleet(personas, monkeypatch):
    seeded = Seeded()
    seed_fleet(seeded, ["big"], 10)
    monkeypatch.setattr(overview, "HEATMAP_COLUMNS", 4)
    from apps.fleet.models import Node

    heatmap = overview.utilization_heatmap(Node.objects.all(), 10)
    assert heatmap["group"] == 3 and heatmap["columns"] == 4 and heatmap["nodes"] == [3, 3, 3, 1]
    assert heatmap["x"] == ["big · n000 … n002", "big · n003 … n005", "big · n006 … n008", "big · n009"]
    for c in range(4):
        members = [n for n in seeded.nodes[c * 3 : c * 3 + 3] if n["exporter_up"]]
        for g in range(GPUS):
            values = [n["util"][g] for n in members]
            assert heatmap["z"][g][c] == round(sum(values) / len(values), 1)
            assert heatmap["spread"][g][c] == [min(values), max(values), len(values)]


def test_demand_and_spend_for_the_platform_admin(seeded, personas, client):
    html = page(client, personas.platform_admin)
    demand = html[html.index('data-testid="overview-demand"') :]
    models = sorted(MODEL_NAMES.values())  # the table's columns, by model name
    codes = {name: code for code, name in MODEL_NAMES.items()}
    for slug in ("a-team", "a", "b"):
        tr = row(demand, f'<tr data-tenant="{slug}">')
        cells = re.findall(r'data-allocated="(\d+)" data-pending="(\d+)"', tr)
        want = [
            (
                str(sum(g for s, c, g, st in seeded.claims if s == slug and c == codes[m] and st == "admitted")),
                str(sum(g for s, c, g, st in seeded.claims if s == slug and c == codes[m] and st == "pending")),
            )
            for m in models
        ]
        assert cells == want, slug
    assert '<tr data-tenant="" class="text-body-secondary">' not in demand  # nobody else to sum up
    spend = html[html.index('data-testid="overview-spend"') :]
    assert re.search(r'<tr data-tenant="a" data-cost="([\d.]+)"', spend).group(1) == str(
        cost_of(seeded, {"a", "a-team"}).quantize(Decimal("0.01"))
    )  # an organization's spend is its whole subtree's
    assert re.search(r'<tr data-tenant="b" data-cost="([\d.]+)"', spend).group(1) == str(
        cost_of(seeded, {"b"}).quantize(Decimal("0.01"))
    )
    assert 'data-tenant="a-team" data-cost' not in spend  # teams are inside their organization's line


def test_a_tenant_member_sees_only_their_own_tenants_rows(seeded, personas, client):
    html = page(client, fresh(personas.member_b))
    demand = html[html.index('data-testid="overview-demand"') :]
    assert '<tr data-tenant="b">' in demand
    assert 'data-tenant="a"' not in demand and 'data-tenant="a-team"' not in demand
    assert "Org A" not in html and "Team A1" not in html
    others = row(demand, '<tr data-tenant="" class="text-body-secondary">')
    assert "2 other tenants" in others
    a_side = [(c, g, st) for s, c, g, st in seeded.claims if s in ("a", "a-team")]
    totals = re.findall(r'data-allocated="(\d+)" data-pending="(\d+)"', others)
    assert [(int(x), int(y)) for x, y in totals] == [
        (
            sum(g for c, g, st in a_side if MODEL_NAMES[c] == m and st == "admitted"),
            sum(g for c, g, st in a_side if MODEL_NAMES[c] == m and st == "pending"),
        )
        for m in sorted(MODEL_NAMES.values())
    ]
    spend = html[html.index('data-testid="overview-spend"') :]
    assert re.findall(r'<tr data-tenant="([^"]*)" data-cost', spend) == ["b"]
    assert "allocation and spend of your tenants only" in html
    # Fleet-wide figures are everyone's: the member sees the same GPUs and incidents as the admin.
    assert 'data-severity="fatal" data-count="2"' in html


def test_a_tenant_admin_sees_their_subtree(seeded, personas, client):
    html = page(client, fresh(personas.tenant_admin_a))
    demand = html[html.index('data-testid="overview-demand"') :]
    assert '<tr data-tenant="a-team">' in demand and '<tr data-tenant="a">' in demand
    assert 'data-tenant="b"' not in demand and "Org B" not in html
    spend = html[html.index('data-testid="overview-spend"') :]
    assert re.findall(r'<tr data-tenant="([^"]*)" data-cost="([\d.]+)"', spend) == [
        ("a", str(cost_of(seeded, {"a", "a-team"}).quantize(Decimal("0.01"))))
    ]


def test_the_tenant_switcher_narrows_tenant_panels(seeded, personas, client):
    client.force_login(personas.platform_admin)
    client.post(reverse("accounts:switch_tenant"), {"tenant": "b", "next": HOME})
    html = client.get(HOME).content.decode()
    spend = html[html.index('data-testid="overview-spend"') :]
    assert re.findall(r'<tr data-tenant="([^"]*)" data-cost', spend) == ["b"]
    assert "allocation and spend of Org B only" in html


def _queries(client) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(HOME).status_code == 200
    return [q["sql"] for q in queries.captured_queries]


@pytest.mark.parametrize("persona", ["platform_admin", "member_b"])
def test_query_count_does_not_grow_with_the_fleet(personas, client, persona):
    client.force_login(personas.user(persona))
    small = Seeded()
    seed_fleet(small, ["s1", "s2"], 4)
    seed_tenant_data(small, personas)
    client.get(HOME)  # the first visit seeds the default isolation policy and the period: not what is measured
    before = _queries(client)
    seed_fleet(small, ["l1", "l2", "l3"], 90)  # 8 → 278 nodes: the heatmap now groups nodes into columns
    seed_tenant_data(small, personas, scale=20)
    after = _queries(client)
    assert len(after) == len(before), "\n".join(after)
    # Issue 23: session, user with memberships, tenants, capacity, incidents with isolation, heatmap, demand,
    # spend, activity, operations.
    assert len(after) <= 10


def test_an_empty_console_says_what_to_do_next(personas, client):
    html = page(client, personas.platform_admin)
    assert 'data-testid="overview-empty"' in html and "No GPU clusters yet" in html
    assert f'href="{reverse("fleet:cluster_list")}">Add a cluster' in html
    html = page(client, fresh(personas.member_a))
    assert "ask yours to connect one" in html and "Add a cluster" not in html
    assert "Your roles" in html and "Recent activity" in html  # the personal panels stay


def test_a_fleet_without_telemetry_or_claims_explains_each_panel(personas, client):
    from apps.fleet.models import Cluster, GpuModel, Node

    cluster = Cluster.objects.create(name="quiet", kind="simulated")
    Node.objects.create(
        cluster=cluster, name="n1", gpu_model=GpuModel.objects.get(code="h100"), state="ready", gpu_count=8,
        gpu_allocatable=8,
    )  # fmt: skip
    html = page(client, personas.platform_admin)
    assert "No GPU telemetry yet" in html and reverse("health:fleet_health") in html
    assert "No workload holds or waits for GPUs." in html and reverse("workloads:workload_submit") in html
    assert "No metered GPU usage this month yet" in html
    assert "No open incidents." in html
    assert "plotly" not in html  # nothing to draw: the bundle is not loaded


def test_subtree_spend_equals_subtree_costs(seeded, personas):
    now = timezone.now()
    period = current_period(now)
    since = max(period.start, now - RUN_RATE_WINDOW)
    total, recent = subtree_spend(period, since)
    assert total == subtree_costs(period)
    assert recent == subtree_costs(period, since=since)
    scoped, _ = subtree_spend(period, since, tenant_ids={personas.a_team.pk})
    assert scoped == {personas.a_team.pk: subtree_costs(period)[personas.a_team.pk]}


def test_overview_of_a_user_without_any_role(db, client):
    from apps.accounts.models import User

    nobody = User.objects.create_user(username="nobody", password="x-very-secret-1")
    html = page(client, nobody)
    assert "No GPU clusters yet" in html and "No roles yet." in html


def test_isolation_budget_counts_only_the_last_hour(seeded, personas, client):
    from apps.health.models import Incident

    Incident.objects.filter(severity="fatal").update(auto_isolated_at=timezone.now() - timedelta(hours=2))
    html = page(client, personas.platform_admin)
    assert 'data-testid="overview-isolation" data-used="0"' in html
    assert "Nothing isolated automatically in the last hour (4 pools)." in html


def test_the_overview_api_answers_the_same_numbers(seeded, personas, api):
    body = api(personas.platform_admin).get("/api/v1/overview/").json()
    h100 = expected_states(seeded, "h100")
    assert {k: v for k, v in body["gpus"]["by_model"][1].items() if k != "model"} == h100
    assert body["gpus"]["total"] == GPUS * len(seeded.nodes) and body["gpus"]["clusters"] == 2
    assert body["incidents"] == {"open": 4, "by_severity": {"fatal": 2, "critical": 2, "warning": 0, "info": 0}}
    assert body["isolation"]["used"] == seeded.auto_isolated
    team = next(t for t in body["demand"]["tenants"] if t["tenant"] == "a-team")
    assert team["by_model"] == {
        MODEL_NAMES["a100"]: {"allocated": 4, "pending": 0},
        MODEL_NAMES["h100"]: {"allocated": 16, "pending": 8},
    }
    spend = {t["tenant"]: t for t in body["spend"]["tenants"]}
    assert spend["a"]["cost_to_date"] == str(cost_of(seeded, {"a", "a-team"}).quantize(Decimal("0.01")))
    assert spend["a"]["monthly_budget"] == "1000.00" and spend["b"]["monthly_budget"] is None
    assert len(body["utilization"]["x"]) == len(seeded.nodes)


def test_the_overview_api_keeps_other_tenants_rows_out(seeded, personas, api):
    body = api(fresh(personas.member_b)).get("/api/v1/overview/").json()
    assert [t["tenant"] for t in body["demand"]["tenants"]] == ["b"]
    assert body["demand"]["other_tenants"]["count"] == 2
    assert [t["tenant"] for t in body["spend"]["tenants"]] == ["b"]
    assert "Org A" not in str(body) and "Team A1" not in str(body)
    token = api(token=personas.token_a_raw).get("/api/v1/overview/").json()
    # A member token on A sees A's rows (a member role does not cover the subtree, as everywhere).
    assert [t["tenant"] for t in token["demand"]["tenants"]] == ["a"]
    assert token["demand"]["other_tenants"]["count"] == 2
    assert api().get("/api/v1/overview/").status_code in (401, 403)


def test_shared_figures_are_cached_but_rows_stay_scoped(seeded, personas, client, settings):
    from apps.core import refcache

    settings.OVERVIEW_CACHE_S = 60
    for key in [k for k in refcache._entries if k.startswith("overview:")]:
        refcache.forget(key)
    page(client, personas.platform_admin)  # fills the cache: the heatmap and every tenant's spend
    client.force_login(fresh(personas.member_b))
    with CaptureQueriesContext(connection) as warm:
        html = client.get(HOME).content.decode()
    warm_sql = " ".join(q["sql"] for q in warm.captured_queries)
    assert "jsonb_each" not in warm_sql and "chargeback_usageday" not in warm_sql
    spend = html[html.index('data-testid="overview-spend"') :]
    assert re.findall(r'<tr data-tenant="([^"]*)" data-cost="([\d.]+)"', spend) == [
        ("b", str(cost_of(seeded, {"b"}).quantize(Decimal("0.01"))))
    ]  # the admin's cached totals, filtered down to the member's own tenant
    assert "Org A" not in html and "Team A1" not in html
    settings.OVERVIEW_CACHE_S = 0
    with CaptureQueriesContext(connection) as cold:
        client.get(HOME)
    cold_sql = " ".join(q["sql"] for q in cold.captured_queries)
    assert "jsonb_each" in cold_sql and "chargeback_usageday" in cold_sql
    assert len(cold) == len(warm) + 2  # heatmap, usage sums (with their rate cards)


def test_a_cluster_not_synced_yet_says_so(personas, client, api):
    from apps.fleet.models import Cluster

    Cluster.objects.create(name="new", kind="simulated")  # no nodes until its first sync
    html = page(client, personas.platform_admin)
    assert "No GPU nodes synced yet" in html and "No GPU telemetry yet" in html
    assert 'data-testid="overview-kpis"' in html
    body = api(personas.platform_admin).get("/api/v1/overview/").json()
    assert body["gpus"]["total"] == 0 and body["gpus"]["by_model"] == [] and body["utilization"] is None
