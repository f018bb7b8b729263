"""One fixed world for the route matrix: the personas, a simulated fleet, and rows of every kind for tenants A and B.

Every tenant-owned row of A is named `alpha-…` and every one of B `bravo-…`, so a response can be searched for
the other tenant's names (`A_MARKERS`, `B_MARKERS`). Fleet rows (cluster, nodes, GPUs, incidents) carry neither
name: they are shared by design. Built once per test package (tests/routes/conftest.py) inside a transaction
that is rolled back at the end; every test runs in a savepoint inside it, so what one test changes the next
never sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from django.db import transaction
from django.test import TestCase
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts import services as accounts
from apps.accounts.models import FederatedTrust, Membership
from apps.accounts.roles import Role
from apps.audit.models import AuditEvent
from apps.backends.types import UsageRecord as BackendUsage
from apps.chargeback import services as chargeback
from apps.chargeback.metering import build_records
from apps.chargeback.models import MeterWatermark, Period, Statement, UsageRecord
from apps.chargeback.periods import current_period, month_start, next_month
from apps.chargeback.rollup import add_to_rollup
from apps.fleet.models import Cluster, GpuModel, Node
from apps.fleet.services import sync_inventory
from apps.health.ingest import run_cycle
from apps.health.models import Incident
from apps.health.services import config as health_config
from apps.health.services.rulesets import active_ruleset
from apps.operations.models import Operation
from apps.tenancy import services as tenancy
from apps.tenancy.models import Admission, GuaranteeCap, PriorityTier
from apps.workloads import services as workloads
from apps.workloads.models import Workload
from tests.utils.personas import PASSWORD, Personas, build_personas, fresh
from tests.utils.simulator import runs_to_the_end

if TYPE_CHECKING:  # the types of the world's rows; where each model lives may change, the world does not care
    from apps.accounts.models import ApiToken, Tenant, User
    from apps.chargeback.models import Credit, SpendBudget
    from apps.health.models import IsolationPolicy, NotificationChannel, Rule, TelemetrySource
    from apps.tenancy.models import Queue, Quota, QuotaRequest
    from apps.workloads.models import WorkloadTemplate

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)
CLUSTER = "rt-sim"

# What another tenant must never see. Names only the tenant's own rows carry (users, queues, workloads, templates,
# service accounts, tokens, channels) and the tenants' names themselves.
A_MARKERS = ("alpha-", "Org A", "Team A1", "member-a")
B_MARKERS = ("bravo-", "Org B", "member-b")


@dataclass
class Side:
    """One tenant's rows: A's (`world.own`) or B's (`world.foreign`)."""

    tenant: Tenant
    team: Tenant | None  # a team under the organization (A: a-team); budgets of teams are set by its managers
    empty_team: Tenant  # a childless team with no history: the one a tenant delete may remove
    queue: Queue
    empty_queue: Queue  # nothing pending or admitted: the one a queue delete may remove
    quota: Quota
    guarantee_cap: GuaranteeCap
    training: Workload
    service: Workload  # an inference service
    template: WorkloadTemplate
    quota_request: QuotaRequest
    admission: Admission
    membership: Membership  # a member's role on the tenant
    service_account: User
    token: ApiToken  # the service account's token
    trust: FederatedTrust  # the service account's trust in a CI issuer (docs/sso.md, "CI pipelines")
    channel: NotificationChannel
    statement: Statement
    credit: Credit
    spend_budget: SpendBudget
    event: AuditEvent
    operation: Operation
    incident: Incident  # an incident that touches this tenant's work only
    busy_node: Node  # the node this tenant's training job runs on (and the incident is on)
    user: User  # a person with a role on this tenant only

    @property
    def budget_tenant(self) -> str:
        """Whose budget to set: A's team (its managers may), B's organization (platform admins only)."""
        return (self.team or self.tenant).slug


@dataclass
class World:
    personas: Personas
    own: Side  # tenant A
    foreign: Side  # tenant B
    cluster: Cluster
    node: Node  # a node with no incident and no operation: runbook actions start cleanly here
    cordoned_node: Node  # cordoned, no incident: uncordon and resume start cleanly here
    shared_incident: Incident  # touches A's work and B's
    gpu_model: GpuModel
    tier: PriorityTier
    rule: Rule
    telemetry_source: TelemetrySource
    isolation_policy: IsolationPolicy
    fault_id: int  # a simulated fault injected on an idle node
    closed_period: Period  # has statements
    open_period: Period  # finished, metered to its end, not closed yet: may be closed
    current_period: Period
    rate_card_id: int
    loner: User  # a person with no role anywhere: someone to grant a role to
    group_mapping_id: int  # an identity provider group mapped to a console-wide role (docs/sso.md)
    sessions: dict[str, str] = field(default_factory=dict)  # persona -> session key
    fingerprint: dict = field(default_factory=dict)  # every table's digest once built (tests/routes/matrix.py)

    def side(self, which: str) -> Side:
        return self.own if which == "own" else self.foreign


def training_spec(tenant: str, name: str, queue: str) -> dict:
    return {
        "name": name,
        "tenant": tenant,
        "queue": queue,
        "tier": "training",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["python", "train.py"],
        "workers": 1,
        "gpus_per_worker": 8,
        "gpu_model": "h100",
        "max_runtime_s": 3600,
    }


def service_spec(tenant: str, name: str, queue: str) -> dict:
    return {
        "name": name,
        "tenant": tenant,
        "queue": queue,
        "engine": "vllm",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
        "tensor_parallel": 1,
        "replicas": 1,
    }


def _months_back(n: int) -> datetime:
    start = month_start(timezone.now())
    for _ in range(n):
        start = month_start(start - timedelta(days=1))
    return start


def _created(api: APIClient, path: str, body: dict) -> dict:
    response = api.post(path, body, format="json")
    assert response.status_code == 201, (path, response.content)
    return response.json()


def build_world() -> World:
    p = build_personas()
    admin = fresh(p.platform_admin)
    # Made through the API where a step has one (as a platform admin would), so this world does not depend on
    # which module holds the code behind it: that moves, the API stays.
    api = APIClient()
    api.force_authenticate(admin)
    shape = {"nodes": 6, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 11}
    _created(api, "/api/v1/clusters/", {"name": CLUSTER, "kind": "simulated", "connection": shape})
    cluster = Cluster.objects.get(name=CLUSTER)
    assert sync_inventory(cluster.pk).ok
    h100 = GpuModel.objects.get(code="h100")
    rate_card = chargeback.set_rate(admin, gpu_model=h100, rate="2.50", effective_from=LONG_AGO)
    loner = accounts.create_user(admin, username="loner", password=PASSWORD)

    # Usage two months ago (closed: statements) and last month (metered to its end, still open).
    closed_start, open_start = _months_back(2), _months_back(1)

    sides = {}
    for key, tenant, team, letter in (("own", p.a, p.a_team, "alpha"), ("foreign", p.b, None, "bravo")):
        tenancy.set_guarantee_cap(admin, tenant=tenant, gpu_model=h100, guaranteed=24)
        queue = tenancy.create_queue(admin, tenant=tenant, name=f"{letter}-q")
        tenancy.bind_queue(admin, queue, cluster=cluster, namespaces=[f"{letter}-ns"])
        quota, _impact = tenancy.set_quota(admin, queue=queue, gpu_model=h100, guaranteed=12)
        empty_queue = tenancy.create_queue(admin, tenant=tenant, name=f"{letter}-empty-q")
        user = accounts.create_user(admin, username=f"{letter}-person", password=PASSWORD)
        accounts.grant_membership(admin, user=user, tenant=tenant, role=Role.VIEWER)
        account = accounts.create_service_account(admin, username=f"{letter}-ci", tenant=tenant, role=Role.MEMBER)
        token, _raw = accounts.issue_token(admin, user=account, name=f"{letter}-token", tenant=tenant, role=Role.MEMBER)
        with TestCase.captureOnCommitCallbacks(execute=True):
            submitter = fresh(p.member_a if key == "own" else p.member_b)
            training, _ = workloads.submit_workload(
                submitter, kind="training", spec=training_spec(tenant.slug, f"{letter}-train", queue.name)
            )
            service, _ = workloads.submit_workload(
                submitter, kind="inference", spec=service_spec(tenant.slug, f"{letter}-chat", queue.name)
            )
        template = workloads.save_template(
            submitter,
            tenant=tenant,
            name=f"{letter}-tpl",
            kind="training",
            spec=training_spec(tenant.slug, f"{letter}-from-tpl", queue.name),
        )
        quota_request = tenancy.request_quota(
            admin, queue=queue, gpu_model=h100, guaranteed=16, justification=f"{letter} needs more"
        )
        channel = health_config.add_channel(
            admin, kind="webhook", target=f"https://{letter}-hooks.example.com/notify", tenant=tenant
        )
        sides[key] = dict(
            tenant=tenant,
            team=team,
            queue=queue,
            empty_queue=empty_queue,
            quota=quota,
            guarantee_cap=GuaranteeCap.objects.get(tenant=tenant, gpu_model=h100),
            training=training,
            service=service,
            template=template,
            quota_request=quota_request,
            membership=Membership.objects.get(user=p.member_a if key == "own" else p.member_b, tenant=tenant),
            service_account=account,
            token=token,
            trust=accounts.create_federated_trust(
                admin,
                service_account=account,
                issuer=f"https://{letter}-gitlab.example.com",
                audience=f"https://{letter}-console.example.com",
                conditions={"project_path": f"{letter}/train", "ref_protected": True},
            ),
            channel=channel,
            user=user,
        )
    workloads.reconcile_workloads()
    runs_to_the_end()
    assert sync_inventory(cluster.pk).ok  # the GPUs now say whose work they run (allocated_to)
    assert not run_cycle(cluster.pk).skipped  # one DCGM scrape: the GPUs' readings name the pods on them

    # Chargeback: metered usage of both tenants in two past months; the older one closed into statements.
    usage = [
        BackendUsage(
            f"{letter}-{when.month}", slug, f"{letter}-q", "h100", 8, when + timedelta(days=2), when + timedelta(days=3)
        )
        for when in (closed_start, open_start)
        for letter, slug in (("alpha", "a"), ("bravo", "b"))
    ]
    rows = build_records(cluster, usage, closed_start)
    with transaction.atomic():
        UsageRecord.objects.bulk_create(rows)
        add_to_rollup(rows)
    MeterWatermark.objects.update_or_create(cluster=cluster, defaults={"metered_until": next_month(open_start)})
    closed = Period.objects.get(start=closed_start)
    chargeback.close_period(admin, closed, reason="month end")
    open_period = Period.objects.get(start=open_start)
    for key in sides:
        sides[key]["statement"] = Statement.objects.get(period=closed, tenant=sides[key]["tenant"])
    for key, amount in (("own", 5000), ("foreign", 7000)):
        sides[key]["spend_budget"] = chargeback.set_spend_budget(
            admin, tenant=sides[key]["tenant"], monthly_amount=Decimal(amount)
        )

    # Health: one incident on a node running A's training job, one on B's; a quiet node and a cordoned one.
    now = timezone.now()
    nodes = {}
    for key in sides:
        training = Workload.objects.get(pk=sides[key]["training"].pk)
        sides[key]["training"] = training
        node = Node.objects.get(cluster=cluster, name=training.placements[0]["node"])
        nodes[key] = node
        incident = Incident.objects.create(
            node=node,
            cause="xid-79",
            rule_key="xid-79",
            ruleset_version=1,
            title=f"XID 79 on {node.name}",
            severity="fatal",
            action="cordon",
            state="detected",
            detected_at=now,
            last_seen_at=now,
        )
        incident.workloads.add(training)
        incident.tenants.add(sides[key]["tenant"])
        sides[key]["incident"] = incident
        sides[key]["busy_node"] = node
        credits = chargeback.credit_interruptions(
            admin,
            cluster=cluster,
            backend_ids=[training.backend_name],
            interrupted_at=now - timedelta(minutes=1),
            reason=f"incident {incident.pk}",
        )
        sides[key]["credit"] = credits[0]
        sides[key]["operation"] = Operation.objects.create(
            kind="test.count", tenant=sides[key]["tenant"], actor=p.member_a if key == "own" else p.member_b
        )
        sides[key]["event"] = AuditEvent.objects.filter(tenant=sides[key]["tenant"]).order_by("id").first()
        sides[key]["admission"] = Admission.objects.filter(queue=sides[key]["queue"]).order_by("id").first()
    # And one on a node both tenants' work ran on: each tenant sees it; neither may see the other's work in it.
    shared_incident = Incident.objects.create(
        node=nodes["own"],
        cause="nvlink",
        rule_key="nvlink",
        ruleset_version=1,
        title=f"NVLink errors on {nodes['own'].name}",
        severity="critical",
        action="alert",
        state="detected",
        detected_at=now,
        last_seen_at=now,
    )
    shared_incident.workloads.add(sides["own"]["service"], sides["foreign"]["service"])
    shared_incident.tenants.add(p.a, p.b)
    # Idle nodes with no incident and no operation on them: a runbook action on one starts cleanly (no 409).
    acted_on = Operation.objects.filter(target_type="fleet.node").values_list("target_id", flat=True)
    quiet = list(
        Node.objects.filter(cluster=cluster, gpu_allocated=0, unschedulable=False, incidents__isnull=True)
        .exclude(pk__in=[int(pk) for pk in acted_on if pk.isdigit()])
        .order_by("name")
    )
    assert len(quiet) >= 2, "the world needs two idle nodes"
    node, cordoned = quiet[0], quiet[1]
    Node.objects.filter(pk=cordoned.pk).update(unschedulable=True)
    fault = _created(
        api, "/api/v1/simulator/faults/", {"cluster": CLUSTER, "node": quiet[-1].name, "kind": "thermal", "gpu": 0}
    )
    telemetry = health_config.configure_source(admin, cluster, kind="simulator")
    policy = health_config.set_isolation_policy(
        admin, None, cordon_severities=["fatal"], drain_severities=[], max_nodes_per_hour=1, max_percent_per_hour=5
    )
    health_config.add_channel(admin, kind="email", target="oncall@example.com")

    # Teams made after the period closed, so no statement holds them: the only tenants that may be deleted.
    for key, parent, letter in (("own", p.a, "alpha"), ("foreign", p.b, "bravo")):
        _created(api, "/api/v1/tenants/", {"name": f"{letter}-empty", "slug": f"{letter}-empty", "parent": parent.slug})
        sides[key]["empty_team"] = type(parent).objects.get(slug=f"{letter}-empty")

    world = World(
        personas=p,
        own=Side(**sides["own"]),
        foreign=Side(**sides["foreign"]),
        cluster=cluster,
        node=node,
        cordoned_node=Node.objects.get(pk=cordoned.pk),
        shared_incident=shared_incident,
        gpu_model=h100,
        tier=PriorityTier.objects.get(name="training"),
        rule=active_ruleset().rules.order_by("key").first(),
        telemetry_source=telemetry,
        isolation_policy=policy,
        fault_id=fault["id"],
        closed_period=closed,
        open_period=open_period,
        current_period=current_period(),
        rate_card_id=rate_card.pk,
        loner=loner,
        group_mapping_id=accounts.create_group_mapping(admin, group="rt-oncall", role=Role.ONCALL).pk,
    )
    assert world.own.training.state == "running" and world.foreign.training.state == "running", (
        world.own.training.state_reason,
        world.foreign.training.state_reason,
    )
    return world


def login_sessions(world: World, client_class) -> None:
    """A session per persona, made once: each request then only presents the cookie."""
    from django.conf import settings

    for name in ("platform_admin", "tenant_admin_a", "member_a", "member_b", "oncall", "viewer_a"):
        client = client_class()
        client.force_login(world.personas.user(name))
        world.sessions[name] = client.cookies[settings.SESSION_COOKIE_NAME].value
