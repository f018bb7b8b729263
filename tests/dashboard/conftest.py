"""A fleet, tenants' claims, incidents and a month's spend, seeded as rows with numbers the tests can recompute.

Node i of a cluster: H100 when i is even, A100 when odd; `i % 9` GPUs allocated; cordoned when i % 7 == 3;
one unhealthy GPU when i % 11 == 5; its exporter silent when i % 13 == 6; GPU g's utilization (i * 8 + g) % 101.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.chargeback.models import SECONDS_PER_HOUR, RateCard, SpendBudget, UsageDay
from apps.chargeback.periods import current_period
from apps.fleet.models import Cluster, GpuModel, Node, NodePool
from apps.health.ingest import gpu_utilization
from apps.health.models import Incident, NodeHealth
from apps.tenancy.models import Admission, PriorityTier, Queue

GPUS = 8
RATES = {"h100": Decimal("2.50"), "a100": Decimal("1.40")}


def node_shape(i: int) -> dict:
    unhealthy = 1 if i % 11 == 5 else 0
    return {
        "model": "h100" if i % 2 == 0 else "a100",
        "allocated": i % 9 if i % 9 <= GPUS - unhealthy else GPUS - unhealthy,
        "cordoned": i % 7 == 3,
        "unhealthy": unhealthy,
        "exporter_up": i % 13 != 6,
        "util": [float((i * GPUS + g) % 101) for g in range(GPUS)],
    }


@dataclass
class Seeded:
    """What was seeded, for the tests to compare the page against."""

    nodes: list[dict] = field(default_factory=list)  # node_shape() plus cluster and name
    claims: list[tuple[str, str, int, str]] = field(default_factory=list)  # (tenant slug, model code, gpus, state)
    usage: list[tuple[str, str, Decimal, bool]] = field(default_factory=list)  # (tenant slug, model, GPU-s, recent)
    incidents: dict[str, int] = field(default_factory=dict)  # open incidents per severity
    auto_isolated: int = 0


def seed_fleet(seeded: Seeded, clusters: list[str], nodes_per_cluster: int) -> None:
    models = {m.code: m for m in GpuModel.objects.filter(code__in=["h100", "a100"])}
    now = timezone.now()
    for name in clusters:
        cluster = Cluster.objects.create(name=name, kind="simulated")
        pools = {
            code: NodePool.objects.create(cluster=cluster, name=f"{code}-pool", gpu_model=m)
            for code, m in models.items()
        }
        rows = []
        for i in range(nodes_per_cluster):
            shape = node_shape(i)
            rows.append(
                Node(
                    cluster=cluster,
                    name=f"n{i:03d}",
                    pool=pools[shape["model"]],
                    gpu_model=models[shape["model"]],
                    state="ready",
                    unschedulable=shape["cordoned"],
                    leaf_switch=f"leaf-{i // 4}",
                    gpu_count=GPUS,
                    gpu_allocatable=GPUS - shape["unhealthy"],
                    gpu_allocated=shape["allocated"],
                    gpu_unhealthy=shape["unhealthy"],
                )
            )
            seeded.nodes.append({**shape, "cluster": name, "name": f"n{i:03d}"})
        created = Node.objects.bulk_create(rows)
        readings = [
            {
                str(g): {"uuid": f"GPU-{name}-{i}-{g}", "v": {"DCGM_FI_DEV_GPU_UTIL": u, "DCGM_FI_DEV_GPU_TEMP": 50.0}}
                for g, u in enumerate(node_shape(i)["util"])
            }
            for i in range(len(created))
        ]
        NodeHealth.objects.bulk_create(
            [
                NodeHealth(
                    node=node,
                    status="ok",
                    exporter_up=node_shape(i)["exporter_up"],
                    scraped_at=now,
                    gpus=readings[i],
                    # as ingest writes it (apps/health/ingest.py): the heatmap reads this
                    gpu_util=gpu_utilization(readings[i]) if node_shape(i)["exporter_up"] else {},
                )
                for i, node in enumerate(created)
            ]
        )
        # Two open incidents (fatal, critical) and a resolved one per cluster; the fatal one isolated by automation.
        Incident.objects.bulk_create(
            [
                Incident(node=created[0], cause="xid-79", rule_key="xid-79", ruleset_version=1, title="XID 79",
                         severity="fatal", action="cordon", state="isolated", detected_at=now, last_seen_at=now,
                         auto_isolated_at=now - timedelta(minutes=5)),
                Incident(node=created[1], cause="thermal", rule_key="thermal", ruleset_version=1, title="hot",
                         severity="critical", action="alert", state="detected", detected_at=now, last_seen_at=now),
                Incident(node=created[2], cause="ecc", rule_key="ecc", ruleset_version=1, title="ECC",
                         severity="warning", action="alert", state="resolved", detected_at=now, last_seen_at=now),
            ]
        )  # fmt: skip
        seeded.incidents["fatal"] = seeded.incidents.get("fatal", 0) + 1
        seeded.incidents["critical"] = seeded.incidents.get("critical", 0) + 1
        seeded.auto_isolated += 1


def seed_tenant_data(seeded: Seeded, personas, scale: int = 1) -> None:
    """Claims (admitted and pending) in queues of a, a-team and b, and this month's priced usage of each."""
    models = {m.code: m for m in GpuModel.objects.filter(code__in=["h100", "a100"])}
    tier = PriorityTier.objects.get(name="training")
    now = timezone.now()
    tenants = {"a": personas.a, "a-team": personas.a_team, "b": personas.b}
    queues = {slug: Queue.objects.get_or_create(tenant=t, name="train")[0] for slug, t in tenants.items()}
    claims = []
    for k in range(scale):
        for slug, code, gpus, state in [
            ("a-team", "h100", 16, "admitted"),
            ("a-team", "h100", 8, "pending"),
            ("a-team", "a100", 4, "admitted"),
            ("a", "a100", 2, "pending"),
            ("b", "h100", 8, "admitted"),
            ("b", "a100", 1, "admitted"),
            ("b", "a100", 3, "pending"),
            ("b", "h100", 4, "released"),  # neither held nor waiting: not counted
        ]:
            claims.append(
                Admission(name=f"{slug}-{code}-{gpus}-{k}", queue=queues[slug], gpu_model=models[code], gpus=gpus,
                          tier=tier, state=state, submitted_at=now)
            )  # fmt: skip
            if state != "released":
                seeded.claims.append((slug, code, gpus, state))
    Admission.objects.bulk_create(claims)
    period = current_period(now)
    cards = {
        code: RateCard.objects.get_or_create(
            gpu_model=m, tier=None, effective_from=period.start, defaults={"rate": RATES[code], "currency": "USD"}
        )[0]
        for code, m in models.items()
    }
    cluster = Cluster.objects.order_by("pk").first()
    rows = []
    today = now.date()
    for k in range(scale):
        for slug, code, hours in [("a", "h100", 10), ("a-team", "h100", 40), ("a-team", "a100", 7), ("b", "a100", 25)]:
            seconds = Decimal(hours * 3600)
            # One row today (inside the run-rate window) and, when the month has one, one on its first day.
            days = [today] if today == period.start.date() else [today, period.start.date()]
            for day in days:
                rows.append(
                    UsageDay(period=period, day=day, cluster=cluster, tenant=tenants[slug], queue=queues[slug],
                             tier=tier, gpu_model=models[code], rate_card=cards[code], gpu_seconds=seconds,
                             idle_gpu_seconds=0, used_gpu_seconds=seconds, records=1)
                )  # fmt: skip
                seeded.usage.append((slug, code, seconds, day == today))
    UsageDay.objects.bulk_create(rows)
    SpendBudget.objects.get_or_create(tenant=personas.a, defaults={"monthly_amount": Decimal(1000), "currency": "USD"})


def cost_of(seeded: Seeded, slugs: set[str]) -> Decimal:
    return sum((s * RATES[code] / SECONDS_PER_HOUR for slug, code, s, _ in seeded.usage if slug in slugs), Decimal(0))


@pytest.fixture
def seeded(personas) -> Seeded:
    seeded = Seeded()
    seed_fleet(seeded, ["c-east", "c-west"], 12)
    seed_tenant_data(seeded, personas)
    return seeded
