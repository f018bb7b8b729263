"""Who may use each page (every route of the URL conf that is not an operation of the API schema).

Written from docs/permissions.md and docs/api.md (the pages call the same services): "view scope" pages show
only the rows of tenants you may view and answer 404 for another tenant's object; a change needs its action.
Keys are URL names (`namespace:name`), or the pattern of an unnamed route. A new route fails the matrix until
it is added here. Prefix rules (`PREFIXES`) cover route families with one rule by construction (the admin).
"""

from __future__ import annotations

import json

from apps.accounts.roles import Action
from tests.routes.matrix import Spec
from tests.routes.policy import (
    BUDGET,
    ISSUE_VIEWER_TOKEN,
    LOGGED_IN,
    PUBLIC,
    TOKENS,
    VIEW,
    Rule,
    console,
    view_and,
)
from tests.routes.world import training_spec


def form_fields(tenant: str, name: str, queue: str) -> dict:
    """What the submit form posts for `training_spec`: its generated fields, no JSON."""
    spec = training_spec(tenant, name, queue)
    return {
        "kind": "training",
        "mode": "fields",
        "name": spec["name"],
        "queue": f"{tenant}/{queue}",
        "tier": spec["tier"],
        "image": spec["image"],
        "command": "\n".join(spec["command"]),
        "workers": str(spec["workers"]),
        "gpus_per_worker": str(spec["gpus_per_worker"]),
        "gpu_model": spec["gpu_model"],
        "max_runtime_s": str(spec["max_runtime_s"]),
    }


ADMINISTER, MANAGE, OPERATE, SUBMIT = Action.ADMINISTER, Action.MANAGE, Action.OPERATE, Action.SUBMIT


def _pool(world):
    from apps.fleet.models import NodePool

    return NodePool.objects.filter(cluster=world.cluster).order_by("name").first()


def post(rule: Rule, **kwargs) -> Spec:
    """A form or button: success redirects (302) to where the result is shown."""
    return Spec(rule, method="POST", ok=kwargs.pop("ok", (302,)), **kwargs)


TABLE: dict[str, Spec] = {
    #
    # Shell, accounts
    #
    "dashboard:home": Spec(LOGGED_IN),
    "login": Spec(PUBLIC, ok=(200, 302)),  # a logged-in user is sent on home
    "logout#post": post(PUBLIC, changes=None),
    # Single sign-on (docs/sso.md) is off in the matrix (no OIDC_ISSUER_URL): both answer 404 to everyone.
    # tests/accounts/test_sso.py and tests/e2e/test_sso.py use them against the real provider.
    "oidc:login": Spec(PUBLIC, ok=(404,)),
    # Group mappings (docs/sso.md): platform admins only, reading included (the mappings name tenants).
    "accounts:group_mappings": Spec(console(ADMINISTER)),
    "accounts:group_mappings#post": post(
        console(ADMINISTER), body=lambda w, s: {"group": "rt-page-group", "role": "viewer", "reason": "route matrix"}
    ),
    "accounts:group_mapping_delete#post": post(console(ADMINISTER), shared=lambda w: {"pk": w.group_mapping_id}),
    "oidc:callback": Spec(PUBLIC, ok=(404,)),
    "set_language#post": post(PUBLIC, body=lambda w, s: {"language": "en", "next": "/"}, changes=False),
    "accounts:profile": Spec(LOGGED_IN),
    "accounts:switch_tenant#post": post(
        VIEW,
        obj=lambda w, s: {},
        body=lambda w, s: {"tenant": s.tenant.slug, "next": "/"},
        changes=False,  # a session preference, not console state
    ),
    "accounts:memberships": Spec(LOGGED_IN),
    "accounts:memberships#post": post(
        Rule(need=(MANAGE, "tenant")),
        obj=lambda w, s: {},
        body=lambda w, s: {"user": "loner", "tenant": s.tenant.pk, "role": "member"},
        in_body=True,  # refused, the page comes back with the form (its user suggestions: no other tenant's)
    ),
    "accounts:membership_change#post": post(
        view_and(MANAGE), obj=lambda w, s: {"pk": s.membership.pk}, body=lambda w, s: {"role": "viewer"}
    ),
    "accounts:membership_revoke#post": post(view_and(MANAGE), obj=lambda w, s: {"pk": s.membership.pk}),
    "accounts:service_account_create#post": post(
        Rule(need=(MANAGE, "tenant")),
        obj=lambda w, s: {},
        body=lambda w, s: {"username": "rt-new-ci", "tenant": s.tenant.pk, "role": "member"},
        in_body=True,
    ),
    "accounts:tokens": Spec(LOGGED_IN),
    "accounts:tokens#post": post(
        ISSUE_VIEWER_TOKEN,
        obj=lambda w, s: {},
        body=lambda w, s: {"name": "rt-token", "tenant": s.tenant.pk, "role": "viewer"},
        in_body=True,
    ),
    "accounts:token_revoke#post": post(TOKENS, obj=lambda w, s: {"pk": s.token.pk}),
    #
    # Tenants, queues, quotas
    #
    "tenancy:tenant_list": Spec(LOGGED_IN),
    "tenancy:tenant_create": Spec(LOGGED_IN),
    "tenancy:tenant_create#post": post(
        Rule(need=(MANAGE, "tenant")),
        obj=lambda w, s: {},
        body=lambda w, s: {"name": "RT new", "slug": "rt-new", "parent": s.tenant.pk},
        in_body=True,
    ),
    "tenancy:tenant_detail": Spec(VIEW, obj=lambda w, s: {"slug": s.tenant.slug}),
    "tenancy:tenant_detail#post": post(
        view_and(MANAGE),
        obj=lambda w, s: {"slug": s.tenant.slug},
        body=lambda w, s: {"name": s.tenant.name, "slug": s.tenant.slug, "description": "changed by the matrix"},
    ),
    "tenancy:tenant_archive#post": post(
        view_and(ADMINISTER, "console"),
        obj=lambda w, s: {"slug": s.empty_team.slug},
        tenant=lambda s: s.empty_team.slug,
    ),
    "tenancy:queue_detail": Spec(VIEW, obj=lambda w, s: {"pk": s.queue.pk}),
    "tenancy:queue_detail#post": post(
        view_and(MANAGE),
        obj=lambda w, s: {"pk": s.queue.pk},
        body=lambda w, s: {"gpu_model": "h100", "guaranteed": 13, "weight": 1.0, "action": "apply"},
    ),
    "tenancy:quota_requests": Spec(LOGGED_IN),
    "tenancy:quota_requests#request": post(
        view_and(MANAGE),
        obj=lambda w, s: {},
        body=lambda w, s: {
            "action": "request",
            "queue": s.queue.pk,
            "gpu_model": "h100",
            "guaranteed": 20,
            "justification": "route matrix",
        },
        in_body=True,
    ),
    "tenancy:quota_requests#decide": post(
        view_and(ADMINISTER, "console"),
        obj=lambda w, s: {},
        body=lambda w, s: {"action": "decide", "request_id": s.quota_request.pk, "approve": "no", "reason": "x"},
    ),
    "tenancy:tiers": Spec(LOGGED_IN),
    "tenancy:tiers#post": post(
        console(ADMINISTER),
        body=lambda w, s: {
            "tier": w.tier.pk,
            "value": w.tier.value,
            "preemptible": "on",
            "may_borrow": "on",
            "description": "changed by the matrix",
        },
    ),
    #
    # Fleet: shared by every tenant, readable by anyone with a role
    #
    "fleet:cluster_list": Spec(LOGGED_IN),
    "fleet:cluster_list#post": post(
        console(ADMINISTER),
        body=lambda w, s: {
            "name": "rt-new",
            "kind": "simulated",
            "connection": json.dumps({"nodes": 1, "gpus_per_node": 8, "models": {"h100": 1}, "seed": 1}),
        },
    ),
    "fleet:capacity": Spec(LOGGED_IN),
    "fleet:gpu_models": Spec(LOGGED_IN),
    "fleet:node_list": Spec(LOGGED_IN),
    "fleet:cluster_detail": Spec(LOGGED_IN, shared=lambda w: {"name": w.cluster.name}),
    # Keyed by its URL, which stays while the page moves from fleet to tenancy (and its URL name may change).
    "fleet/clusters/<str:name>/desired-state/": Spec(
        LOGGED_IN,
        shared=lambda w: {"name": w.cluster.name},
    ),
    "fleet:cluster_sync#post": post(console(OPERATE), shared=lambda w: {"name": w.cluster.name}),
    "fleet:cluster_test_connection#post": post(
        console(OPERATE), shared=lambda w: {"name": w.cluster.name}, changes=None
    ),
    "fleet:cluster_quota_push#post": post(
        console(ADMINISTER), shared=lambda w: {"name": w.cluster.name}, body=lambda w, s: {"dry_run": "1"}
    ),
    "fleet:cluster_quota_drift#post": post(console(OPERATE), shared=lambda w: {"name": w.cluster.name}),
    # The cluster page's pools table: a pool's pre-pull list (docs/inference.md: warm starts).
    "fleet:pool_prepull#post": post(
        console(ADMINISTER),
        shared=lambda w: {"name": w.cluster.name, "pool": _pool(w).name},
        body=lambda w, s: {"images": "vllm/vllm-openai:v0.11.0\nlmsysorg/sglang:v0.5.3", "reason": "route matrix"},
    ),
    # A node's pages, on the node running A's work and on the one running B's.
    "fleet:node_detail": Spec(
        LOGGED_IN,
        obj=lambda w, s: {"cluster": w.cluster.name, "name": s.busy_node.name},
    ),
    "fleet:node_telemetry": Spec(LOGGED_IN, obj=lambda w, s: {"cluster": w.cluster.name, "name": s.busy_node.name}),
    "fleet:node_fault#post": post(
        console(OPERATE),
        shared=lambda w: {"cluster": w.cluster.name, "name": w.node.name},
        body=lambda w, s: {"kind": "thermal", "gpu": "1", "reason": "route matrix"},
    ),
    #
    # Workloads and inference services
    #
    "workloads:workload_list": Spec(LOGGED_IN),
    "workloads:template_list": Spec(LOGGED_IN),
    "workloads:workload_submit": Spec(LOGGED_IN),
    "workloads:workload_submit#post": post(
        view_and(SUBMIT),
        obj=lambda w, s: {},
        body=lambda w, s: {
            "kind": "training",
            "spec": json.dumps(training_spec(s.tenant.slug, "rt-new-job", s.queue.name)),
        },
        in_body=True,
    ),
    # The submit form's previews (docs/workloads.md): a submission's checks, nothing stored; the spec names the
    # tenant, as the submission's does. The form's own fields are posted (queue "tenant/queue"), no JSON.
    **{
        f"workloads:submit_preview#{key}": Spec(
            view_and(SUBMIT),
            method="POST",
            obj=lambda w, s, key=key: {"key": key},
            body=lambda w, s: form_fields(s.tenant.slug, "rt-new-job", s.queue.name),
            in_body=True,
            ok=(200,),
            changes=False,
        )
        for key in ("admission", "rendering", "cost")
    },
    # The editor in the other mode (fields <-> YAML): text only, the user's own queues as choices.
    "workloads:submit_editor#post": post(
        LOGGED_IN,
        body=lambda w, s: {**form_fields(w.own.tenant.slug, "rt-new-job", w.own.queue.name), "to": "yaml"},
        ok=(200,),
        changes=False,
    ),
    "workloads:workload_detail": Spec(VIEW, obj=lambda w, s: {"pk": s.training.pk}),
    "workloads:workload_logs": Spec(VIEW, obj=lambda w, s: {"pk": s.training.pk}),
    "workloads:workload_cancel#post": post(view_and(SUBMIT), obj=lambda w, s: {"pk": s.training.pk}),
    "inference:service_telemetry": Spec(VIEW, obj=lambda w, s: {"pk": s.service.pk}),
    "inference:service_slo#post": post(
        view_and(MANAGE),
        obj=lambda w, s: {"pk": s.service.pk},
        body=lambda w, s: {"ttft_target_s": 2.5, "tpot_target_s": 0.2, "objective": 0.95},
    ),
    #
    # Chargeback
    #
    "chargeback:overview": Spec(LOGGED_IN),
    "chargeback:statement_list": Spec(LOGGED_IN),
    "chargeback:statement_detail": Spec(VIEW, obj=lambda w, s: {"pk": s.statement.pk}),
    "chargeback:statement_draft": Spec(
        VIEW, obj=lambda w, s: {"slug": s.tenant.slug}, query=lambda w, s: f"period={w.open_period.label}"
    ),
    "chargeback:period_list": Spec(LOGGED_IN),
    "chargeback:period_list#close": post(
        console(ADMINISTER), body=lambda w, s: {"period": w.open_period.pk, "action": "close", "reason": "x"}
    ),
    "chargeback:period_list#reopen": post(
        console(ADMINISTER), body=lambda w, s: {"period": w.closed_period.pk, "action": "reopen", "reason": "x"}
    ),
    "chargeback:rate_cards": Spec(LOGGED_IN),
    "chargeback:rate_cards#post": post(
        console(ADMINISTER),
        body=lambda w, s: {"gpu_model": "h100", "rate": "2.75", "effective_from": "2031-01-01 00:00"},
    ),
    "chargeback:tenant_spend": Spec(VIEW, obj=lambda w, s: {"slug": s.budget_tenant}, tenant=lambda s: s.budget_tenant),
    "chargeback:tenant_spend#post": post(
        BUDGET,
        obj=lambda w, s: {"slug": s.budget_tenant},
        tenant=lambda s: s.budget_tenant,
        body=lambda w, s: {"monthly_amount": "1234.00", "thresholds": "50, 100"},
    ),
    #
    # Health
    #
    "health:fleet_health": Spec(LOGGED_IN),
    "health:incident_list": Spec(LOGGED_IN),
    "health:incident_detail": Spec(VIEW, obj=lambda w, s: {"pk": s.incident.pk}),
    # An incident touching both tenants' work: both see it, neither the other's workloads in it.
    "health:incident_detail#both": Spec(
        LOGGED_IN,
        shared=lambda w: {"pk": w.shared_incident.pk},
    ),
    "health:incident_transition#post": post(
        view_and(OPERATE, "console"),
        obj=lambda w, s: {"pk": s.incident.pk},
        body=lambda w, s: {"to": "false-positive", "reason": "route matrix"},
    ),
    "health:node_health": Spec(LOGGED_IN, obj=lambda w, s: {"pk": s.busy_node.pk}),
    # The drain preview on the page names every tenant's work it would evict: on-call and platform admins only.
    "health:node_health#preview": Spec(
        console(OPERATE),
        obj=lambda w, s: {"pk": s.busy_node.pk},
        query="preview=drain",
    ),
    "health:node_action#post": post(
        console(OPERATE),
        shared=lambda w: {"pk": w.node.pk},
        body=lambda w, s: {"action": "cordon", "reason": "route matrix"},
    ),
    "health:rules": Spec(LOGGED_IN),
    "health:rules#post": post(
        console(ADMINISTER),
        body=lambda w, s: {
            "key": w.rule.key,
            "severity": w.rule.severity,
            "action": w.rule.action,
            "params": json.dumps(w.rule.params),
            "reason": "route matrix",
        },
    ),
    #
    # Audit, operations, analytics
    #
    "audit:event_list": Spec(LOGGED_IN),
    "audit:event_detail": Spec(VIEW, obj=lambda w, s: {"pk": s.event.pk}),
    "operations:operation_list": Spec(LOGGED_IN),
    "operations:operation_detail": Spec(VIEW, obj=lambda w, s: {"pk": s.operation.pk}),
    "observability:waits": Spec(LOGGED_IN),
    #
    # Probes, metrics and the simulator's exporters: no login by design (a load balancer or a scraper calls
    # them; /metrics is limited by address or METRICS_TOKEN instead)
    #
    "healthz": Spec(PUBLIC),
    "readyz": Spec(PUBLIC),
    "metrics": Spec(PUBLIC, tenant_view=False),
    "simulator:node_metrics": Spec(
        PUBLIC, shared=lambda w: {"cluster": w.cluster.name, "node": w.node.name}, tenant_view=False
    ),
    "simulator:service_metrics": Spec(
        PUBLIC, shared=lambda w: {"cluster": w.cluster.name, "name": w.own.service.backend_name}, tenant_view=False
    ),
    #
    # The API's own pages: the schema and its docs need no login (docs/api.md); the browsable root does
    #
    "api:schema": Spec(PUBLIC),
    "api:docs": Spec(PUBLIC),
    "api:redoc": Spec(PUBLIC),
    "api:api-root": Spec(LOGGED_IN),
}

# The Django admin: open to platform admins only (docs/permissions.md); everyone else is sent to its login. One
# rule for the whole family, so a model newly registered there is covered by construction.
ADMIN = Spec(console(ADMINISTER))
PREFIXES: dict[str, Spec] = {"admin:": ADMIN, "admin/": ADMIN}


def admin_ok(pattern: str, has_row: bool) -> tuple[int, ...]:
    """What the admin answers a platform admin, by kind of view: pages 200; an object's bare URL redirects to its
    change page; add and delete may be refused (403) where the console's services own the rows (tenants,
    memberships, tokens, audit events, operations); an object that does not exist sends back to the index."""
    if pattern.startswith("admin/r/") or pattern.endswith("(?P<url>.*)$"):
        return (302, 404)  # view on site: only models with a page of their own; an unknown admin URL
    if not has_row:
        return (302,)
    if pattern.endswith("<path:object_id>/"):
        return (302,)
    if pattern.endswith(("/add/", "/delete/")):
        return (200, 403)
    if pattern == "admin/autocomplete/":
        return (403,)  # asked without naming a model and field
    return (200,)


TABLE.update(
    {
        "admin:login": Spec(PUBLIC, ok=(200, 302)),  # a platform admin already in is sent to the index
        "admin:logout": Spec(PUBLIC, ok=(302, 405)),  # by GET: refused (405), or sent to the login first
    }
)
