"""Every main page, read in Simplified Chinese by a platform admin, has no English left but data and technical terms.

The demo's data is seeded (tenants, a simulated fleet with work, quotas, a quota request, a closed chargeback
month, wait history), its work runs on the simulator for half an hour and is metered, and a GPU fault opens an
incident, so the pages show their tables, badges, costs and notes, not only empty states (must_show() checks that
they do). What a page shows of that data (names, descriptions, stored reasons) is
removed before looking for English words, as are code/pre/kbd elements, scripts and the technical terms in
ALLOWED, which stay as they are in Chinese text too. Identifiers (camelCase, dotted or slashed names, words
with digits, 'quoted' words) and acronyms in capitals (GPU, XID, DCGM, MIG, API, CSV) count as technical.
"""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import translation

from apps.backends.simulator.faults import KINDS
from tests.i18n.visible import Data, english_words, visible_text
from tests.utils.simulator import runs_to_the_end

PASSWORD = "i18n-crawl-pass"

# Technical terms and identifiers that Chinese operators read in Latin letters. Keep this list short:
# a word belongs here only when a Chinese page should really show it untranslated.
ALLOWED = {
    # product and project names
    "Kubernetes",
    "Slurm",
    "Kueue",
    "Volcano",
    "Prometheus",
    "NVIDIA",
    "Grafana",
    "NVLink",
    "PCIe",
    "SGLang",
    "HAMi",
    "nixl",  # NVIDIA's KV-cache transfer library, a prefill/decode split's transfer_backend choice
    # a spec's network choice (auto | rdma | tcp), the values a spec is written with (docs/networking.md)
    "auto",
    "rdma",
    "tcp",
    # Kubernetes and scheduling terms Chinese operators use as they are (Kueue's Cohort, gang scheduling,
    # dcgm-exporter's "exporter", Tensor Cores, kubeconfig files)
    "Cohort",
    "Cohorts",
    "Pod",
    "gang",
    "exporter",
    "Tensor",
    "kubeconfig",
    # Kubernetes objects and values kept as they are: a Secret, a toleration's operator Equal or Exists
    "Secret",
    "Equal",
    "Exists",
    "Hugging",  # Hugging Face, where models come from
    "Face",
    # units
    "ms",
    # the language switcher names English in English
    "English",
}


def _string_leaves(value, out: set[str]) -> None:
    if isinstance(value, str):
        if len(value) < 300:
            out.add(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _string_leaves(key, out)
            _string_leaves(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _string_leaves(item, out)


def seeded_values() -> set[str]:
    """Every stored string a page may show as data: free-text fields and JSON string leaves (not choice values,
    which a page must show translated)."""
    values: set[str] = set()
    for model in apps.get_models():
        if not model._meta.app_label.startswith(
            (
                "accounts",
                "tenancy",
                "fleet",
                "workloads",
                "health",
                "chargeback",
                "inference",
                "operations",
                "audit",
                "backends",
                "observability",
            )
        ):
            continue
        for field in model._meta.concrete_fields:
            if isinstance(field, models.CharField | models.TextField) and not field.choices:
                values.update(v for v in model.objects.values_list(field.name, flat=True).distinct()[:5000] if v)
            elif isinstance(field, models.JSONField):
                for value in model.objects.values_list(field.name, flat=True)[:2000]:
                    _string_leaves(value, values)
    values.update(KINDS)  # the simulator's fault kinds, the names `manage.py simulate fault --kind` takes
    return values


def run_the_fleet(cluster) -> None:
    """Half an hour of the seeded work, as the demo's worker and beat would run it: the workloads reach the simulator,
    run and are metered, so the overview shows allocation, utilization and spend, and a workload its cost."""
    from apps.backends.simulator.services import advance_time
    from apps.chargeback.metering import meter_cluster
    from apps.fleet.services import sync_inventory
    from apps.workloads.services import drain_outbox, reconcile_workloads

    assert drain_outbox()  # Celery runs eagerly in tests: the seeded workloads go to the simulator now
    runs_to_the_end()
    advance_time(None, cluster, 30)
    sync_inventory(cluster.pk)
    reconcile_workloads()
    assert meter_cluster(cluster.pk).ok


@pytest.fixture
def demo(db):
    from apps.accounts.models import Tenant, User
    from apps.accounts.services import issue_token
    from apps.backends.simulator.services import inject_fault
    from apps.dashboard.demo import DEMO_CLUSTER, seed_demo
    from apps.fleet.models import Cluster
    from apps.fleet.services import create_cluster
    from apps.health.ingest import run_cycle
    from apps.health.models import Incident
    from apps.health.operation_handlers import WORKLOADS_EVICTED
    from apps.operations.models import Operation, OperationStatus

    seed_demo("admin", PASSWORD)
    cluster = Cluster.objects.get(name=DEMO_CLUSTER)
    run_the_fleet(cluster)
    run_cycle(cluster.pk)
    inject_fault(None, cluster, "gpu-0002", "xid79", 4, reason="game day")
    run_cycle(cluster.pk)
    incident = Incident.objects.order_by("pk").first()
    # An active token: the token list shows its revoke confirmation dialog.
    admin = User.objects.get(username="admin")
    issue_token(admin, user=admin, name="ci", tenant=Tenant.objects.get(slug="acme"), role="member")
    # A Kubernetes cluster (never contacted): its page offers the quota push behind a confirmation dialog.
    create_cluster(admin, name="k8s-lab", kind="kubernetes", connection={"queueing": "kueue"})
    # A drain under way with counted steps ("1 of 3 workloads evicted"), as the runner leaves it mid-drain: the
    # operation pages and the node's health page show the progress. Test data only, so no service call.
    Operation.objects.create(
        kind="health.drain",
        status=OperationStatus.RUNNING,
        target_type="fleet.node",
        target_id=str(incident.node.pk),
        target_label=f"{cluster.name}/{incident.node.name}",
        actor=admin,
        reason="game day",
        progress=33.0,
        steps_done=1,
        steps_total=3,
        steps_label=WORKLOADS_EVICTED,
    )
    return incident


def main_pages(incident) -> list[str]:
    from apps.accounts.models import Membership
    from apps.audit.models import AuditEvent
    from apps.chargeback.models import Statement
    from apps.chargeback.periods import current_period
    from apps.operations.models import Operation
    from apps.tenancy.models import Queue
    from apps.workloads.models import Workload, WorkloadTemplate

    training = Workload.objects.filter(kind="training").order_by("pk").first()
    service = Workload.objects.filter(kind="inference").order_by("pk").first()
    template = WorkloadTemplate.objects.order_by("pk").first()
    queue = Queue.objects.filter(tenant__slug="acme-llm").order_by("pk").first()
    node = incident.node
    statement = Statement.objects.order_by("pk").first()
    open_period = current_period()
    assert Membership.objects.exists() and statement is not None and template is not None
    return [
        reverse("dashboard:home"),
        reverse("fleet:cluster_list"),
        reverse("fleet:cluster_detail", args=[node.cluster.name]),
        reverse("fleet:cluster_desired_state", args=[node.cluster.name]),
        reverse("fleet:cluster_detail", args=["k8s-lab"]),
        reverse("fleet:node_list"),
        reverse("fleet:node_detail", args=[node.cluster.name, node.name]),
        reverse("fleet:node_telemetry", args=[node.cluster.name, node.name]),
        reverse("fleet:capacity"),
        reverse("fleet:gpu_models"),
        reverse("health:fleet_health"),
        reverse("health:node_health", args=[node.pk]),
        reverse("health:node_health", args=[node.pk]) + "?preview=drain&reason=x",
        reverse("health:incident_list"),
        reverse("health:incident_detail", args=[incident.pk]),
        reverse("health:rules"),
        reverse("workloads:workload_list"),
        reverse("workloads:workload_list") + "?q=no-such-workload",  # the empty state of a filtered list
        reverse("workloads:workload_list") + "?sort=name",  # a sorted header (its screen-reader text)
        reverse("workloads:template_list"),
        reverse("workloads:workload_detail", args=[training.pk]),
        reverse("workloads:workload_logs", args=[training.pk]),
        reverse("workloads:workload_detail", args=[service.pk]),
        reverse("inference:service_telemetry", args=[service.pk]),
        reverse("workloads:workload_submit"),
        reverse("workloads:workload_submit") + "?kind=inference",
        reverse("workloads:workload_submit") + f"?template={template.pk}",
        reverse("tenancy:tenant_list"),
        reverse("tenancy:tenant_create"),
        reverse("tenancy:tenant_detail", args=["acme-llm"]),
        reverse("chargeback:tenant_spend", args=["acme"]),
        reverse("tenancy:queue_detail", args=[Queue.objects.order_by("pk").first().pk]),
        reverse("tenancy:quota_requests"),
        reverse("tenancy:quota_requests") + f"?queue={queue.pk}&gpu_model=h100",
        reverse("tenancy:tiers"),
        reverse("chargeback:overview"),
        reverse("chargeback:statement_list"),
        reverse("chargeback:statement_detail", args=[statement.pk]),
        reverse("chargeback:statement_draft", args=["acme"]) + f"?period={open_period.label}",
        reverse("chargeback:period_list"),
        reverse("chargeback:rate_cards"),
        reverse("chargeback:rate_cards") + "?gpu_model=h100&rate=2.5",
        reverse("audit:event_list"),
        reverse("audit:event_detail", args=[AuditEvent.objects.order_by("pk").first().pk]),
        reverse("operations:operation_list"),
        reverse("operations:operation_detail", args=[Operation.objects.order_by("pk").first().pk]),
        reverse("operations:operation_detail", args=[Operation.objects.filter(steps_total__gt=0).get().pk]),
        reverse("accounts:profile"),
        reverse("accounts:memberships"),
        reverse("accounts:tokens"),
        reverse("observability:waits"),
        "/no-such-page/",
    ]


def live_partials(incident) -> list[str]:
    """What the pages' htmx polls fetch (HX-Request): the list regions and the live parts of detail pages."""
    from apps.operations.models import Operation
    from apps.workloads.models import Workload

    return [
        reverse("workloads:workload_list"),
        reverse("workloads:workload_detail", args=[Workload.objects.order_by("pk").first().pk]),
        reverse("fleet:node_list"),
        reverse("health:incident_list"),
        reverse("health:incident_detail", args=[incident.pk]),
        reverse("health:node_health", args=[incident.node.pk]),
        reverse("operations:operation_list"),
        reverse("operations:operation_detail", args=[Operation.objects.filter(steps_total__gt=0).get().pk]),
    ]


def must_show(incident) -> dict[str, list[str]]:
    """What the crawl must find on some pages, so that it reads their newest parts and not an empty state: the
    overview's panels with data, a workload's metered cost, an incident's next step, a queue row's "request more",
    a rate's "change" link and a new rate for a model, a new token's CI example, a template beside its overrides."""
    from apps.workloads.models import Workload, WorkloadTemplate

    training = Workload.objects.filter(kind="training").order_by("pk").first()
    template = WorkloadTemplate.objects.order_by("pk").first()
    return {
        reverse("dashboard:home"): [
            'id="overview-heatmap"',
            'data-testid="overview-demand"',
            'data-stranded="',
            'data-testid="overview-spend"',
            "progress-bar bg-primary",
        ],
        reverse("workloads:workload_detail", args=[training.pk]): ['data-testid="cost-amount"'],
        reverse("health:incident_detail", args=[incident.pk]): ['data-testid="next-step"'],
        reverse("tenancy:tenant_detail", args=["acme-llm"]): ['data-testid="request-quota"', "&amp;gpu_model="],
        reverse("chargeback:rate_cards"): ['data-testid="change-rate"'],
        reverse("chargeback:rate_cards") + "?gpu_model=h100&rate=2.5": ["h100 的新费率"],
        reverse("accounts:tokens"): ['data-testid="ci-example"'],
        reverse("workloads:workload_submit") + f"?template={template.pk}": ['data-testid="template-card"'],
    }


def crawl(client, urls, data: Data | None) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Read each page in Chinese: ({url: the text pieces with English words left}, {url: its HTML})."""
    problems: dict[str, list[str]] = {}
    pages: dict[str, str] = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code == (404 if url == "/no-such-page/" else 200), url
        html = pages[url] = response.content.decode()
        if "<html" in html:
            assert '<html lang="zh-hans"' in html, url
        left = english_words(visible_text(html), data, ALLOWED)
        if left:
            problems[url] = sorted({piece[:160] for _word, piece in left})
    return problems, pages


def english_left(client, urls, data: Data | None) -> dict[str, list[str]]:
    return crawl(client, urls, data)[0]


def log_in_in_chinese(client, username: str = "admin") -> None:
    client.post(reverse("login"), {"username": username, "password": PASSWORD})
    # The language switcher stores the choice (a cookie) and every page after it is in Chinese.
    response = client.post(reverse("set_language"), {"language": "zh-hans", "next": reverse("dashboard:home")})
    assert response.status_code == 302 and client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"


def test_every_main_page_is_chinese(demo, client):
    from apps.accounts.models import Tenant

    log_in_in_chinese(client)
    # A new token: the token page shows it once, with the CI example, the next time it is read (in the crawl).
    created = client.post(
        reverse("accounts:tokens"),
        {"name": "i18n-ci", "role": "member", "tenant": Tenant.objects.get(slug="acme-llm").pk, "expires_in_days": 30},
    )
    assert created.status_code == 302, created.content.decode()[:2000]
    data = Data(seeded_values())
    problems, pages = crawl(client, main_pages(demo), data)
    for url in live_partials(demo):
        response = client.get(url, HTTP_HX_REQUEST="true")
        assert response.status_code == 200 and "<html" not in response.content.decode(), url
        left = english_words(visible_text(response.content.decode()), data, ALLOWED)
        if left:
            problems[f"{url} (htmx)"] = sorted({piece[:160] for _word, piece in left})
    missing = {url: [m for m in markers if m not in pages[url]] for url, markers in must_show(demo).items()}
    assert not any(missing.values()), f"The crawl does not reach what these pages should show: {missing}"
    assert not problems, "English left on zh-Hans pages:\n" + json.dumps(problems, indent=1, ensure_ascii=False)


def test_an_incident_next_step_is_chinese_in_every_state(demo, client):
    """The incident page's "next step" card says something else in each state (and offers a resume form once the
    node is validated while still cordoned): every variant reads in Chinese."""
    from apps.fleet.models import Node
    from apps.health.models import Incident

    log_in_in_chinese(client)
    url = reverse("health:incident_detail", args=[demo.pk])
    data = Data(seeded_values())
    problems = {}
    states = ["detected", "isolating", "isolated", "draining", "drained", "repairing", "validating", "validating"]
    for i, state in enumerate(states):
        # Set directly (a test's shortcut, not a transition): only the page's reading of the state is under test.
        Incident.objects.filter(pk=demo.pk).update(state=state)
        Node.objects.filter(pk=demo.node_id).update(unschedulable=i < len(states) - 1)
        html = client.get(url).content.decode()
        assert 'data-testid="next-step"' in html, state
        if state == "validating" and i < len(states) - 1:
            assert 'data-testid="resume-form"' in html
        problems.update({f"{state} {key}": value for key, value in english_left(client, [url], data).items()})
    assert not problems, "English left on zh-Hans pages:\n" + json.dumps(problems, indent=1, ensure_ascii=False)


def test_the_overview_is_chinese_for_every_viewer(demo, client):
    """The overview as a tenant admin and as a member of another organization (their own tenants' rows, the others'
    demand summed in one line, only their spend), and inside one tenant (the tenant switcher)."""
    home = reverse("dashboard:home")
    data = Data(seeded_values())
    problems = {}
    for username in ("alice", "carol"):
        client.logout()
        log_in_in_chinese(client, username)
        page = client.get(home).content.decode()
        assert 'data-tenant=""' in page and 'data-testid="overview-spend"' in page, username  # "N other tenants"
        problems.update({f"{username}: {k}": v for k, v in english_left(client, [home], data).items()})
    client.post(reverse("accounts:switch_tenant"), {"tenant": "lab-rl"})
    problems.update({f"carol in lab-rl: {k}": v for k, v in english_left(client, [home], data).items()})
    assert not problems, "English left on zh-Hans pages:\n" + json.dumps(problems, indent=1, ensure_ascii=False)


def test_the_overview_before_any_cluster_is_chinese(db, client):
    """An empty console: a platform admin is told how to add a cluster, anyone else to ask for one."""
    from apps.accounts import services as accounts

    admin = accounts.bootstrap_platform_admin(username="admin", password=PASSWORD)
    accounts.create_user(admin, username="nobody", password=PASSWORD, email="nobody@example.com", reason="i18n crawl")
    problems = {}
    for username in ("admin", "nobody"):
        client.logout()
        log_in_in_chinese(client, username)
        assert 'data-testid="overview-empty"' in client.get(reverse("dashboard:home")).content.decode()
        problems.update({f"{username}: {k}": v for k, v in english_left(client, ["/"], Data(seeded_values())).items()})
    assert not problems, "English left on zh-Hans pages:\n" + json.dumps(problems, indent=1, ensure_ascii=False)


def test_the_login_page_follows_accept_language(db, client):
    response = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")
    html = response.content.decode()
    assert '<html lang="zh-hans"' in html
    assert not english_words(visible_text(html), None, ALLOWED)
    with translation.override("en"):
        english = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert '<html lang="en"' in english and "Log in" in english


# A spec wrong in many ways at once, each error a message the parser writes (apps/workloads/specs).
BAD_SPEC = {
    "name": "Bad_Name",
    "tenant": "acme-llm",
    "queue": "train",
    "image": "pytorch",
    "workers": 0,
    "gpus_per_worker": 8,
    "gpu_model": "h100",
    "sharing": {"mode": "mig"},
    "elastic": {"min_workers": True, "max_workers": 2, "checkpoint_path": "ckpt/"},
    "volumes": "scratch",
    "env": {"SLURM_JOB_ID": "1"},
}


def test_spec_errors_reasons_and_incident_titles_are_chinese(demo, client):
    """The texts the main crawl counts as data because they are stored in English (a waiting workload's reason, its
    timeline, incident and rule titles) read in Chinese too, as do the spec parser's messages on the submit form."""
    from apps.accounts.models import User
    from apps.health.models import Rule
    from apps.health.rules import DEFAULT_RULES
    from apps.tenancy.models import Queue
    from apps.workloads.models import Workload, WorkloadEvent
    from apps.workloads.services import submit_workload

    # acme-llm's train queue is full (its guarantee and borrow limit are in use): one more job waits, with a reason.
    spec = {**{k: BAD_SPEC[k] for k in ("tenant", "queue", "gpu_model")}, "name": "i18n-waits", "workers": 2}
    spec.update(image="nvcr.io/nvidia/pytorch:24.08-py3", command=["torchrun", "train.py"], gpus_per_worker=8)
    waiting, _created = submit_workload(User.objects.get(username="admin"), kind="training", spec=spec)
    assert waiting.state == "pending" and "free within guarantee" in waiting.state_reason, waiting.state_reason
    events = set(WorkloadEvent.objects.filter(workload=waiting).values_list("message", flat=True))
    assert any(message.startswith("submitted by admin; admission: ") for message in events), events

    client.post(reverse("login"), {"username": "admin", "password": PASSWORD})
    client.post(reverse("set_language"), {"language": "zh-hans", "next": reverse("dashboard:home")})
    from apps.health.models import Incident

    incident = Incident.objects.order_by("pk").first()
    stored_english = {
        waiting.state_reason,
        waiting.admission.reason,
        *events,
        *Incident.objects.values_list("title", flat=True),
        *Rule.objects.filter(title__in=[r.title for r in DEFAULT_RULES]).values_list("title", flat=True),
    }
    data = Data(seeded_values() - stored_english)
    submitted = client.post(reverse("workloads:workload_submit"), {"kind": "training", "spec": json.dumps(BAD_SPEC)})
    assert submitted.status_code == 400 and not Workload.objects.filter(name="Bad_Name").exists()
    form = submitted.content.decode()
    for shown in ("'name'：'Bad_Name' 不是有效的名称", "'image'：'pytorch' 没有标签或摘要", "'workers'：必须在 1 到"):
        assert any(shown in piece for piece in visible_text(form)), shown
    queue = Queue.objects.get(tenant__slug="acme-llm", name="train")
    pages = {
        "submit with a bad spec": form,
        **{
            url: client.get(url).content.decode()
            for url in [
                reverse("workloads:workload_detail", args=[waiting.pk]),
                reverse("workloads:workload_list"),
                reverse("tenancy:tenant_detail", args=["acme-llm"]),
                reverse("tenancy:queue_detail", args=[queue.pk]),
                reverse("health:incident_list"),
                reverse("health:incident_detail", args=[incident.pk]),
                reverse("health:rules"),
            ]
        },
    }
    assert "保障内空闲" in pages[reverse("workloads:workload_detail", args=[waiting.pk])]
    assert "致命 XID" in pages[reverse("health:incident_detail", args=[incident.pk])]
    problems = {}
    for page, html in pages.items():
        left = english_words(visible_text(html), data, ALLOWED)
        if left:
            problems[page] = sorted({piece[:160] for _word, piece in left})
    assert not problems, "English left on zh-Hans pages:\n" + json.dumps(problems, indent=1, ensure_ascii=False)
