"""Who may call each operation of the API (every path × method of the OpenAPI schema drf-spectacular generates).

Written from docs/api.md's "who may call it" column and docs/permissions.md: "view scope" rows answer 404
outside your view; a write the action does not allow answers 403; an unauthenticated call 401. Keys are
"METHOD /path/" as in the schema; "key#variant" adds another request to the same operation (another body).
Every body is valid, so that a refusal is the permission's and not the input's. New rows are named `rt-…`, with
neither tenant's marker (`alpha-`, `bravo-`); a name the request itself sent may come back in the answer and is
not taken for a leak.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from apps.accounts.roles import Action
from tests.routes.matrix import Spec
from tests.routes.policy import (
    BUDGET,
    CHANNELS,
    ISSUE_VIEWER_TOKEN,
    LOGGED_IN,
    PUBLIC,
    TOKENS,
    TRUSTS,
    VIEW,
    Rule,
    console,
    view_and,
)
from tests.routes.world import training_spec

ADMINISTER, MANAGE, OPERATE, SUBMIT = Action.ADMINISTER, Action.MANAGE, Action.OPERATE, Action.SUBMIT


RUNBOOK = ("cordon", "uncordon", "drain", "resume", "request-reset", "mark-rma")


def _write(rule: Rule, method: str = "POST", ok: tuple[int, ...] = (201,), **kwargs) -> Spec:
    return Spec(rule, method=method, ok=ok, **kwargs)


def _pool(world):
    from apps.fleet.models import NodePool

    return NodePool.objects.filter(cluster=world.cluster).order_by("name").first()


def _node(w, s) -> dict:
    return {"id": s.busy_node.pk}


TABLE: dict[str, Spec] = {
    #
    # You, tenants, people, tokens
    #
    "GET /api/v1/me/": Spec(LOGGED_IN),
    "GET /api/v1/tenants/": Spec(LOGGED_IN),
    "POST /api/v1/tenants/": _write(
        Rule(need=(MANAGE, "tenant")),  # with a parent: manage on the parent
        obj=lambda w, s: {},
        body=lambda w, s: {"name": "RT new", "slug": "rt-new", "parent": s.tenant.slug},
        in_body=True,
    ),
    "GET /api/v1/tenants/{slug}/": Spec(VIEW, obj=lambda w, s: {"slug": s.tenant.slug}),
    "PATCH /api/v1/tenants/{slug}/": _write(
        view_and(MANAGE),
        "PATCH",
        (200,),
        obj=lambda w, s: {"slug": s.tenant.slug},
        body=lambda w, s: {"description": "changed by the matrix"},
    ),
    "DELETE /api/v1/tenants/{slug}/": _write(
        view_and(ADMINISTER, "console"),
        "DELETE",
        (204,),
        obj=lambda w, s: {"slug": s.empty_team.slug},
        tenant=lambda s: s.empty_team.slug,
    ),
    "POST /api/v1/tenants/{slug}/archive/": _write(
        view_and(ADMINISTER, "console"),
        ok=(200,),
        obj=lambda w, s: {"slug": s.empty_team.slug},
        body=lambda w, s: {"reason": "no longer used"},
        tenant=lambda s: s.empty_team.slug,
    ),
    "POST /api/v1/tenants/{slug}/unarchive/": _write(
        view_and(ADMINISTER, "console"),
        ok=(409,),  # the world's tenants are live: "not archived", nothing changed (the refusal still is the role's)
        obj=lambda w, s: {"slug": s.empty_team.slug},
        tenant=lambda s: s.empty_team.slug,
        changes=False,
    ),
    "GET /api/v1/users/": Spec(LOGGED_IN),
    "GET /api/v1/users/{username}/": Spec(VIEW, obj=lambda w, s: {"username": s.user.username}),
    "POST /api/v1/users/{username}/allow-sso-link/": _write(
        view_and(ADMINISTER, "console"),
        ok=(200,),
        obj=lambda w, s: {"username": s.user.username},
        body=lambda w, s: {"reason": "moving to single sign-on"},
    ),
    "GET /api/v1/memberships/": Spec(LOGGED_IN),
    "POST /api/v1/memberships/": _write(
        Rule(need=(MANAGE, "tenant")),
        obj=lambda w, s: {},
        body=lambda w, s: {"user": "loner", "tenant": s.tenant.slug, "role": "member"},
        in_body=True,
    ),
    "GET /api/v1/memberships/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.membership.pk}),
    "PATCH /api/v1/memberships/{id}/": _write(
        view_and(MANAGE),
        "PATCH",
        (200,),
        obj=lambda w, s: {"id": s.membership.pk},
        body=lambda w, s: {"role": "viewer"},
    ),
    "DELETE /api/v1/memberships/{id}/": _write(
        view_and(MANAGE), "DELETE", (204,), obj=lambda w, s: {"id": s.membership.pk}
    ),
    # Identity provider group mappings (docs/sso.md): platform admins only, reads included (they name tenants).
    "GET /api/v1/group-mappings/": Spec(console(ADMINISTER)),
    "POST /api/v1/group-mappings/": _write(
        console(ADMINISTER), body=lambda w, s: {"group": "rt-new-group", "role": "viewer", "reason": "route matrix"}
    ),
    "GET /api/v1/group-mappings/{id}/": Spec(console(ADMINISTER), shared=lambda w: {"id": w.group_mapping_id}),
    "DELETE /api/v1/group-mappings/{id}/": _write(
        console(ADMINISTER), "DELETE", (204,), shared=lambda w: {"id": w.group_mapping_id}
    ),
    "GET /api/v1/service-accounts/": Spec(LOGGED_IN),
    "POST /api/v1/service-accounts/": _write(
        Rule(need=(MANAGE, "tenant")),
        obj=lambda w, s: {},
        body=lambda w, s: {"username": "rt-new-ci", "tenant": s.tenant.slug},
        in_body=True,
    ),
    "GET /api/v1/service-accounts/{username}/": Spec(VIEW, obj=lambda w, s: {"username": s.service_account.username}),
    "GET /api/v1/tokens/": Spec(LOGGED_IN),
    "POST /api/v1/tokens/": _write(
        ISSUE_VIEWER_TOKEN,
        obj=lambda w, s: {},
        body=lambda w, s: {"name": "rt-token", "role": "viewer", "tenant": s.tenant.slug},
        in_body=True,
    ),
    "GET /api/v1/tokens/{id}/": Spec(TOKENS, obj=lambda w, s: {"id": s.token.pk}),
    "POST /api/v1/tokens/{id}/revoke/": _write(
        TOKENS, ok=(200,), obj=lambda w, s: {"id": s.token.pk}, body=lambda w, s: {"reason": "route matrix"}
    ),
    # CI pipelines' identity (docs/sso.md): trusts are managed like the service account's tokens; the exchange
    # needs no credentials (the ID token is one) and refuses a token no trust accepts with 401, audited.
    "GET /api/v1/federated-trusts/": Spec(LOGGED_IN),
    "POST /api/v1/federated-trusts/": _write(
        Rule(need=(MANAGE, "tenant")),
        obj=lambda w, s: {},
        body=lambda w, s: {
            "service_account": s.service_account.username,
            "issuer": "https://rt-gitlab.example.com",
            "audience": "https://rt-console.example.com",
            "conditions": {"project_path": "rt/train"},
        },
        in_body=True,
    ),
    "GET /api/v1/federated-trusts/{id}/": Spec(TRUSTS, obj=lambda w, s: {"id": s.trust.pk}),
    "DELETE /api/v1/federated-trusts/{id}/": _write(TRUSTS, "DELETE", (204,), obj=lambda w, s: {"id": s.trust.pk}),
    "POST /api/v1/token-exchange/": _write(
        PUBLIC,
        ok=(401,),
        body=lambda w, s: {
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": "not-a-jwt",
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        },
    ),
    #
    # Audit, operations
    #
    "GET /api/v1/audit-events/": Spec(LOGGED_IN),
    "GET /api/v1/audit-events/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.event.pk}),
    "GET /api/v1/operations/": Spec(LOGGED_IN),
    "GET /api/v1/operations/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.operation.pk}),
    #
    # Fleet: anyone with a role reads; platform admins change; on-call operates
    #
    "GET /api/v1/clusters/": Spec(LOGGED_IN),
    "POST /api/v1/clusters/": _write(
        console(ADMINISTER),
        body=lambda w, s: {
            "name": "rt-new",
            "kind": "simulated",
            "connection": {"nodes": 1, "gpus_per_node": 8, "models": {"h100": 1}, "seed": 1},
        },
    ),
    "GET /api/v1/clusters/{name}/": Spec(LOGGED_IN, shared=lambda w: {"name": w.cluster.name}),
    "PATCH /api/v1/clusters/{name}/": _write(
        console(ADMINISTER),
        "PATCH",
        (200,),
        shared=lambda w: {"name": w.cluster.name},
        body=lambda w, s: {"description": "changed by the matrix"},
    ),
    "DELETE /api/v1/clusters/{name}/": _write(
        console(ADMINISTER),
        "DELETE",
        (409,),  # the world's cluster has metered usage and statements: refused, naming them, nothing changed
        shared=lambda w: {"name": w.cluster.name},
        changes=False,
    ),
    "POST /api/v1/clusters/{name}/sync/": _write(
        console(OPERATE), ok=(202,), shared=lambda w: {"name": w.cluster.name}
    ),
    "POST /api/v1/clusters/{name}/quota-push/": _write(
        console(ADMINISTER), ok=(202,), shared=lambda w: {"name": w.cluster.name}, body=lambda w, s: {"reason": "rt"}
    ),
    # Node pools (docs/inference.md: warm starts; docs/networking.md): anyone with a role reads; platform admins set
    # the pre-pull list and declare the fabric.
    "GET /api/v1/pools/": Spec(LOGGED_IN),
    "GET /api/v1/pools/{id}/": Spec(LOGGED_IN, shared=lambda w: {"id": _pool(w).pk}),
    "PUT /api/v1/pools/{id}/prepull/": _write(
        console(ADMINISTER),
        "PUT",
        (200,),
        shared=lambda w: {"id": _pool(w).pk},
        body=lambda w, s: {"images": ["vllm/vllm-openai:v0.11.0"], "reason": "route matrix"},
    ),
    "PATCH /api/v1/pools/{id}/": _write(
        console(ADMINISTER),
        "PATCH",
        (200,),
        shared=lambda w: {"id": _pool(w).pk},
        body=lambda w, s: {"fabric": "ethernet", "nccl_socket_ifname": "=eth0", "reason": "route matrix"},
    ),
    "POST /api/v1/clusters/{name}/test-connection/": _write(
        console(OPERATE),
        ok=(200,),
        shared=lambda w: {"name": w.cluster.name},
        changes=False,  # "changes nothing"
    ),
    "GET /api/v1/nodes/": Spec(LOGGED_IN),
    "GET /api/v1/nodes/{id}/": Spec(LOGGED_IN, obj=_node),
    "GET /api/v1/nodes/{id}/impact/": Spec(
        console(OPERATE),
        obj=_node,
        query="action=drain",
    ),
    "GET /api/v1/gpus/": Spec(LOGGED_IN),
    "GET /api/v1/gpus/#node": Spec(  # the node's GPUs, as the node page asks for them
        LOGGED_IN,
        obj=lambda w, s: {},
        query=lambda w, s: f"node={s.busy_node.name}",
    ),
    "GET /api/v1/gpus/{id}/": Spec(
        LOGGED_IN,
        obj=lambda w, s: {"id": s.busy_node.gpus.order_by("index").first().pk},
    ),
    "GET /api/v1/gpu-models/": Spec(LOGGED_IN),
    "GET /api/v1/gpu-models/{id}/": Spec(LOGGED_IN, shared=lambda w: {"id": w.gpu_model.pk}),
    "GET /api/v1/capacity/": Spec(LOGGED_IN),
    "GET /api/v1/overview/": Spec(LOGGED_IN),
    #
    # Health
    #
    "GET /api/v1/incidents/": Spec(LOGGED_IN),
    "GET /api/v1/incidents/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.incident.pk}),
    # An incident touching both tenants' work: both see it, neither the other's workloads in it.
    "GET /api/v1/incidents/{id}/#both": Spec(LOGGED_IN, shared=lambda w: {"id": w.shared_incident.pk}),
    "POST /api/v1/incidents/{id}/transition/": _write(
        view_and(OPERATE, "console"),
        ok=(200,),
        obj=lambda w, s: {"id": s.incident.pk},
        body=lambda w, s: {"to": "false-positive", "reason": "route matrix"},
    ),
    "GET /api/v1/health-rules/": Spec(LOGGED_IN),
    "GET /api/v1/health-rules/{key}/": Spec(LOGGED_IN, shared=lambda w: {"key": w.rule.key}),
    "PATCH /api/v1/health-rules/{key}/": _write(
        console(ADMINISTER),
        "PATCH",
        (200,),
        shared=lambda w: {"key": w.rule.key},
        body=lambda w, s: {"enabled": not w.rule.enabled, "reason": "route matrix"},
    ),
    "GET /api/v1/isolation-policies/": Spec(LOGGED_IN),
    "POST /api/v1/isolation-policies/": _write(
        console(ADMINISTER),
        body=lambda w, s: {
            "cordon_severities": ["fatal", "critical"],
            "drain_severities": [],
            "max_nodes_per_hour": 2,
            "max_percent_per_hour": 10,
        },
    ),
    "GET /api/v1/isolation-policies/{id}/": Spec(LOGGED_IN, shared=lambda w: {"id": w.isolation_policy.pk}),
    "GET /api/v1/telemetry-sources/": Spec(LOGGED_IN),
    "POST /api/v1/telemetry-sources/": _write(
        console(ADMINISTER), body=lambda w, s: {"cluster": w.cluster.name, "kind": "simulator", "timeout_s": 3}
    ),
    "GET /api/v1/telemetry-sources/{id}/": Spec(LOGGED_IN, shared=lambda w: {"id": w.telemetry_source.pk}),
    "GET /api/v1/notification-channels/": Spec(LOGGED_IN),
    "POST /api/v1/notification-channels/": _write(
        Rule(need=(MANAGE, "tenant")),
        obj=lambda w, s: {},
        body=lambda w, s: {"tenant": s.tenant.slug, "kind": "email", "target": "rt@example.com"},
        in_body=True,
    ),
    "GET /api/v1/notification-channels/{id}/": Spec(CHANNELS, obj=lambda w, s: {"id": s.channel.pk}),
    "DELETE /api/v1/notification-channels/{id}/": _write(
        CHANNELS, "DELETE", (204,), obj=lambda w, s: {"id": s.channel.pk}
    ),
    #
    # Simulator (on-call and platform admins change it; anyone with a role reads)
    #
    "GET /api/v1/simulator/faults/": Spec(LOGGED_IN),
    "POST /api/v1/simulator/faults/": _write(
        console(OPERATE),
        body=lambda w, s: {
            "cluster": w.cluster.name,
            "node": w.node.name,
            "kind": "thermal",
            "gpu": 2,
            "reason": "route matrix",
        },
    ),
    "GET /api/v1/simulator/faults/{id}/": Spec(LOGGED_IN, shared=lambda w: {"id": w.fault_id}),
    "DELETE /api/v1/simulator/faults/{id}/": _write(
        console(OPERATE), "DELETE", (200,), shared=lambda w: {"id": w.fault_id}
    ),
    "POST /api/v1/simulator/advance/": _write(
        console(OPERATE), ok=(200,), body=lambda w, s: {"cluster": w.cluster.name, "minutes": 1}
    ),
    #
    # Queues, quotas, budgets, tiers, quota requests, admission
    #
    "GET /api/v1/tiers/": Spec(LOGGED_IN),
    "GET /api/v1/tiers/{name}/": Spec(LOGGED_IN, shared=lambda w: {"name": w.tier.name}),
    "PATCH /api/v1/tiers/{name}/": _write(
        console(ADMINISTER),
        "PATCH",
        (200,),
        shared=lambda w: {"name": w.tier.name},
        body=lambda w, s: {"description": "changed by the matrix"},
    ),
    "GET /api/v1/queues/": Spec(LOGGED_IN),
    "POST /api/v1/queues/": _write(
        Rule(need=(MANAGE, "tenant")),
        obj=lambda w, s: {},
        body=lambda w, s: {"tenant": s.tenant.slug, "name": "rt-new-q"},
        in_body=True,
    ),
    "GET /api/v1/queues/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.queue.pk}),
    "PATCH /api/v1/queues/{id}/": _write(
        view_and(MANAGE),
        "PATCH",
        (200,),
        obj=lambda w, s: {"id": s.queue.pk},
        body=lambda w, s: {"description": "changed by the matrix"},
    ),
    "DELETE /api/v1/queues/{id}/": _write(
        view_and(MANAGE), "DELETE", (204,), obj=lambda w, s: {"id": s.empty_queue.pk}
    ),
    "POST /api/v1/queues/{id}/bind/": _write(
        view_and(ADMINISTER, "console"),
        ok=(200,),
        obj=lambda w, s: {"id": s.empty_queue.pk},
        body=lambda w, s: {"cluster": w.cluster.name, "namespaces": ["rt-extra-ns"]},
    ),
    "GET /api/v1/quotas/": Spec(LOGGED_IN),
    "POST /api/v1/quotas/": _write(
        view_and(MANAGE),
        obj=lambda w, s: {},
        body=lambda w, s: {"queue": s.queue.pk, "gpu_model": "h100", "guaranteed": 13, "reason": "route matrix"},
        in_body=True,
    ),
    "GET /api/v1/quotas/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.quota.pk}),
    "POST /api/v1/quotas/preview/": _write(
        VIEW,
        ok=(200,),
        obj=lambda w, s: {},
        body=lambda w, s: {"queue": s.queue.pk, "gpu_model": "h100", "guaranteed": 2},
        changes=False,
    ),
    "GET /api/v1/budgets/": Spec(LOGGED_IN),
    "POST /api/v1/budgets/": _write(
        BUDGET,
        obj=lambda w, s: {},
        tenant=lambda s: s.budget_tenant,
        # within the organization's 24 (A's team), above its queues' 12 (B)
        body=lambda w, s: {"tenant": s.budget_tenant, "gpu_model": "h100", "guaranteed": 4 if s.team else 30},
        in_body=True,
    ),
    "GET /api/v1/budgets/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.guarantee_cap.pk}),
    "GET /api/v1/quota-requests/": Spec(LOGGED_IN),
    "POST /api/v1/quota-requests/": _write(
        view_and(MANAGE),
        obj=lambda w, s: {},
        body=lambda w, s: {"queue": s.queue.pk, "gpu_model": "h100", "guaranteed": 20, "justification": "x"},
        in_body=True,
    ),
    "GET /api/v1/quota-requests/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.quota_request.pk}),
    "POST /api/v1/quota-requests/{id}/decide/": _write(
        view_and(ADMINISTER, "console"),
        ok=(200,),
        obj=lambda w, s: {"id": s.quota_request.pk},
        body=lambda w, s: {"approve": False, "reason": "route matrix"},
    ),
    "GET /api/v1/admissions/": Spec(LOGGED_IN),
    "GET /api/v1/admissions/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.admission.pk}),
    "POST /api/v1/admission/preview/": _write(
        VIEW,
        ok=(200,),
        obj=lambda w, s: {},
        changes=False,
        body=lambda w, s: {"queue": s.queue.pk, "gpu_model": "h100", "gpus": 8, "tier": "training"},
    ),
    "GET /api/v1/analytics/waits/": Spec(LOGGED_IN),
    "GET /api/v1/analytics/why-pending/": Spec(LOGGED_IN),
    #
    # Workloads, templates, inference services
    #
    "GET /api/v1/workloads/": Spec(LOGGED_IN),
    "POST /api/v1/workloads/": _write(
        view_and(SUBMIT),
        obj=lambda w, s: {},
        body=lambda w, s: {"kind": "training", "spec": training_spec(s.tenant.slug, "rt-new-job", s.queue.name)},
        in_body=True,
    ),
    "GET /api/v1/workloads/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.training.pk}),
    "GET /api/v1/workloads/{id}/rendered/": Spec(VIEW, obj=lambda w, s: {"id": s.training.pk}),
    # The log, streamed from the (simulated) cluster: its lines name the workload and its nodes, never the other's.
    "GET /api/v1/workloads/{id}/logs/": Spec(VIEW, obj=lambda w, s: {"id": s.training.pk}),
    "GET /api/v1/workloads/{id}/logs/#one-worker": Spec(
        VIEW, obj=lambda w, s: {"id": s.training.pk}, query="worker=0&tail=5"
    ),
    "POST /api/v1/workloads/{id}/cancel/": _write(
        view_and(SUBMIT), ok=(200,), obj=lambda w, s: {"id": s.training.pk}, body=lambda w, s: {"reason": "x"}
    ),
    # A heartbeat writes last_heartbeat_at and, on purpose, no audit event (docs/health.md): not checked as a change.
    "POST /api/v1/workloads/{id}/heartbeat/": _write(
        view_and(SUBMIT), ok=(200,), obj=lambda w, s: {"id": s.training.pk}, changes=None
    ),
    "GET /api/v1/templates/": Spec(LOGGED_IN),
    "GET /api/v1/workload-specs/{kind}/schema/": Spec(LOGGED_IN, shared=lambda w: {"kind": "training"}),
    "POST /api/v1/templates/": _write(
        view_and(SUBMIT),
        obj=lambda w, s: {},
        body=lambda w, s: {
            "tenant": s.tenant.slug,
            "name": "rt-new-tpl",
            "kind": "training",
            "spec": training_spec(s.tenant.slug, "rt-from-new-tpl", s.queue.name),
        },
        in_body=True,
    ),
    "GET /api/v1/templates/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.template.pk}),
    "POST /api/v1/templates/{id}/submit/": _write(
        view_and(SUBMIT), obj=lambda w, s: {"id": s.template.pk}, body=lambda w, s: {"overrides": {"name": "rt-x"}}
    ),
    "GET /api/v1/services/": Spec(LOGGED_IN),
    "GET /api/v1/services/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.service.pk}),
    "GET /api/v1/services/{id}/alerts/": Spec(VIEW, obj=lambda w, s: {"id": s.service.pk}),
    "GET /api/v1/services/{id}/slo/": Spec(VIEW, obj=lambda w, s: {"id": s.service.pk}),
    "PUT /api/v1/services/{id}/slo/": _write(
        view_and(MANAGE),
        "PUT",
        (200,),
        obj=lambda w, s: {"id": s.service.pk},
        body=lambda w, s: {"ttft_target_s": 2.5, "reason": "route matrix"},
    ),
    "GET /api/v1/services/{id}/telemetry/": Spec(VIEW, obj=lambda w, s: {"id": s.service.pk}),
    #
    # Chargeback
    #
    "GET /api/v1/statements/": Spec(LOGGED_IN),
    "GET /api/v1/statements/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.statement.pk}),
    "GET /api/v1/statements/{id}/csv/": Spec(VIEW, obj=lambda w, s: {"id": s.statement.pk}),
    "GET /api/v1/periods/": Spec(LOGGED_IN),
    "GET /api/v1/periods/{id}/": Spec(LOGGED_IN, shared=lambda w: {"id": w.closed_period.pk}),
    "POST /api/v1/periods/{id}/close/": _write(
        console(ADMINISTER), ok=(200,), shared=lambda w: {"id": w.open_period.pk}, body=lambda w, s: {"reason": "x"}
    ),
    "POST /api/v1/periods/{id}/reopen/": _write(
        console(ADMINISTER), ok=(200,), shared=lambda w: {"id": w.closed_period.pk}, body=lambda w, s: {"reason": "x"}
    ),
    "GET /api/v1/rate-cards/": Spec(LOGGED_IN),
    "POST /api/v1/rate-cards/": _write(
        console(ADMINISTER),
        body=lambda w, s: {"gpu_model": "h100", "rate": "2.75", "effective_from": "2031-01-01T00:00:00Z"},
    ),
    "GET /api/v1/rate-cards/{id}/": Spec(LOGGED_IN, shared=lambda w: {"id": w.rate_card_id}),
    "GET /api/v1/spend-budgets/": Spec(LOGGED_IN),
    "POST /api/v1/spend-budgets/": _write(
        BUDGET,
        obj=lambda w, s: {},
        tenant=lambda s: s.budget_tenant,
        body=lambda w, s: {"tenant": s.budget_tenant, "monthly_amount": "1234.00"},
        in_body=True,
    ),
    "GET /api/v1/spend-budgets/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.spend_budget.pk}),
    "GET /api/v1/credits/": Spec(LOGGED_IN),
    "POST /api/v1/credits/": _write(
        console(OPERATE),  # platform admins and on-call
        obj=lambda w, s: {},
        body=lambda w, s: {
            "cluster": w.cluster.name,
            "backend_ids": [s.training.backend_name],
            "interrupted_at": (timezone.now() - timedelta(minutes=2)).isoformat(),
            "reason": "route matrix",
        },
    ),
    "GET /api/v1/credits/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.credit.pk}),
}

# Runbook actions: each needs on-call or platform admin; with dry_run only the impact, nothing changed.
for _action in RUNBOOK:
    _node_for = (
        (lambda w: {"id": w.cordoned_node.pk}) if _action in ("uncordon", "resume") else (lambda w: {"id": w.node.pk})
    )
    TABLE[f"POST /api/v1/nodes/{{id}}/{_action}/"] = _write(
        console(OPERATE), ok=(202,), shared=_node_for, body=lambda w, s: {"reason": "route matrix"}
    )
    TABLE[f"POST /api/v1/nodes/{{id}}/{_action}/#dry-run"] = _write(
        console(OPERATE),
        ok=(200,),
        obj=_node,
        body=lambda w, s: {"reason": "route matrix", "dry_run": True},
        changes=False,
    )
