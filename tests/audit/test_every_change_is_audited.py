"""Every state-changing endpoint writes exactly one audit event.

The test walks the URL patterns: each API route with a POST/PUT/PATCH/DELETE method, and each HTML
route that does not answer POST with 405, must have a case below (or a written exemption). A new
endpoint without a case fails `test_every_state_changing_endpoint_has_a_case`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from apps.accounts.models import Membership
from apps.audit.models import AuditEvent
from tests.utils.personas import PASSWORD, fresh

UNSAFE = {"post", "put", "patch", "delete"}

# Routes that accept POST but change no console state, with the reason.
EXEMPT = {
    ("accounts:switch_tenant", "post"): "session preference (which tenant the pages show), not console state",
    ("set_language", "post"): "language cookie, not console state",
    ("api:cluster-test-connection", "post"): "reads only: asks the backend whether it answers",
    ("fleet:cluster_test_connection", "post"): "reads only: asks the backend whether it answers",
    ("api:admission-preview", "post"): "reads only: decides a hypothetical request",
    ("api:quota-preview", "post"): "reads only: previews a quota change",
    ("workloads:submit_preview", "post"): "reads only: previews a submission (tests/workloads/test_submit_previews.py)",
    ("workloads:submit_editor", "post"): "reads only: turns the submit form into YAML and back",
    ("api:workload-heartbeat", "post"): (
        "telemetry, not a change: a running job's liveness signal (its last heartbeat time, like a token's "
        "last_used_at), sent as often as every training step; the incident its silence opens is audited "
        "(docs/health.md)"
    ),
}
SKIP_NAMESPACES = {"admin"}  # Django admin: covered by tests/audit/test_append_only.py::test_admin_*


def _walk(resolver: URLResolver, prefix: str = "", namespace: str | None = None):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            ns = pattern.namespace or namespace
            if ns in SKIP_NAMESPACES:
                continue
            full_ns = f"{namespace}:{pattern.namespace}" if namespace and pattern.namespace else ns
            yield from _walk(pattern, prefix + str(pattern.pattern), full_ns)
        elif isinstance(pattern, URLPattern) and pattern.name:
            name = f"{namespace}:{pattern.name}" if namespace else pattern.name
            yield name, prefix + str(pattern.pattern), pattern.callback


def _api_methods(callback) -> set[str]:
    cls = getattr(callback, "cls", None)
    if getattr(callback, "actions", None):
        return set(callback.actions) & set(cls.http_method_names)
    return {m for m in cls.http_method_names if hasattr(cls, m)} if cls else set()


def _sample_kwargs(route: str, personas) -> dict:
    # "walk" names both a cluster and a node in it (see _walk_cluster), so every fleet route resolves.
    values = {
        "pk": personas.token_a.pk,
        "slug": personas.a.slug,
        "username": personas.ci_a.username,
        "name": "walk",
        "cluster": "walk",
        "node": "walk",
        "key": "admission",  # a submit preview's
        "pool": "walk",
    }
    return {name: values[name] for name in re.findall(r"<(?:\w+:)?(\w+)>", route) if name in values}


def _walk_cluster():
    from apps.fleet.models import Cluster, Node
    from apps.fleet.services import create_simulated_cluster

    cluster = Cluster.objects.filter(name="walk").first() or create_simulated_cluster(
        None, "walk", {"nodes": 2, "gpus_per_node": 2, "models": {"h100": 1.0}, "seed": 3}
    )
    Node.objects.get_or_create(cluster=cluster, name="walk")
    Node.objects.get_or_create(cluster=cluster, name="gpu-0001")
    return cluster


def discover(personas, client) -> set[tuple[str, str]]:
    _walk_cluster()
    found: set[tuple[str, str]] = set()
    for name, route, callback in _walk(get_resolver()):
        if "format" in route:
            continue  # DRF's format-suffix duplicates of the same routes
        if hasattr(callback, "cls"):  # DRF
            found |= {(name, m) for m in _api_methods(callback) & UNSAFE}
            continue
        try:
            url = reverse(name, kwargs=_sample_kwargs(route, personas))
        except Exception:
            found.add((name, "post?"))
            continue
        client.force_login(personas.platform_admin)  # the logout route ends the session; log in again each time
        response = client.post(url, {})
        if response.status_code != 405:
            found.add((name, "post"))
    return found


#
# The cases: one valid request per state-changing endpoint, by a persona allowed to make it.
#


def _api(api, personas, who="platform_admin"):
    return api(fresh(personas.user(who)))


CASES: dict[tuple[str, str], Callable] = {}
SETUPS: dict[tuple[str, str], Callable] = {}


def case(name: str, method: str, setup: Callable | None = None):
    """Register the request for (route, method); `setup(personas)` runs first and its events are not counted."""

    def register(fn):
        CASES[(name, method)] = fn
        if setup is not None:
            SETUPS[(name, method)] = setup
        return fn

    return register


@case("api:tenant-list", "post")
def _(personas, api, client):
    return _api(api, personas, "tenant_admin_a").post(
        "/api/v1/tenants/", {"name": "T", "slug": "t", "parent": "a"}, format="json"
    )


@case("api:tenant-detail", "patch")
def _(personas, api, client):
    return _api(api, personas, "tenant_admin_a").patch("/api/v1/tenants/a-team/", {"name": "Renamed"}, format="json")


@case("api:tenant-detail", "delete")
def _(personas, api, client):
    return _api(api, personas).delete("/api/v1/tenants/a-team/?reason=merged")


@case("api:tenant-archive", "post")
def _(personas, api, client):
    return _api(api, personas).post("/api/v1/tenants/a-team/archive/", {"reason": "disbanded"}, format="json")


def _archive_a_team(personas):
    from apps.tenancy.services import archive_tenant

    return archive_tenant(fresh(personas.platform_admin), personas.a_team)


@case("api:tenant-unarchive", "post", setup=_archive_a_team)
def _(personas, api, client, tenant):
    return _api(api, personas).post("/api/v1/tenants/a-team/unarchive/", {}, format="json")


@case("api:membership-list", "post")
def _(personas, api, client):
    return _api(api, personas, "tenant_admin_a").post(
        "/api/v1/memberships/", {"user": "member-b", "tenant": "a-team", "role": "viewer"}, format="json"
    )


@case("api:membership-detail", "patch")
def _(personas, api, client):
    m = Membership.objects.get(user=personas.member_a, tenant=personas.a)
    return _api(api, personas, "tenant_admin_a").patch(
        f"/api/v1/memberships/{m.pk}/", {"role": "viewer"}, format="json"
    )


@case("api:membership-detail", "delete")
def _(personas, api, client):
    m = Membership.objects.get(user=personas.member_a, tenant=personas.a)
    return _api(api, personas, "tenant_admin_a").delete(f"/api/v1/memberships/{m.pk}/")


@case("api:user-allow-sso-link", "post")
def _(personas, api, client):
    return _api(api, personas).post(
        f"/api/v1/users/{personas.member_a.username}/allow-sso-link/", {"reason": "moving to SSO"}, format="json"
    )


@case("api:group-mapping-list", "post")
def _(personas, api, client):
    return _api(api, personas, "platform_admin").post(
        "/api/v1/group-mappings/", {"group": "gpu:{tenant}:{role}"}, format="json"
    )


def _a_group_mapping(personas):
    from apps.accounts.services import create_group_mapping

    return create_group_mapping(personas.platform_admin, group="gpu-oncall", role="on-call")


@case("api:group-mapping-detail", "delete", setup=_a_group_mapping)
def _(personas, api, client, mapping):
    return _api(api, personas, "platform_admin").delete(f"/api/v1/group-mappings/{mapping.pk}/")


@case("accounts:group_mappings", "post")
def _(personas, api, client):
    client.force_login(personas.platform_admin)
    return client.post("/accounts/group-mappings/", {"group": "gpu:{tenant}:{role}"})


@case("accounts:group_mapping_delete", "post", setup=_a_group_mapping)
def _(personas, api, client, mapping):
    client.force_login(personas.platform_admin)
    return client.post(f"/accounts/group-mappings/{mapping.pk}/delete/", {"reason": "gone"})


def _a_trusting_pipeline(personas):
    from apps.accounts import federation
    from apps.accounts.services import create_federated_trust
    from tests.utils.tiny_issuer import TinyIssuer

    issuer = TinyIssuer()
    federation.forget()
    create_federated_trust(
        personas.tenant_admin_a,
        service_account=personas.ci_a,
        issuer=issuer.url,
        audience="https://console.example.test",
        conditions={"project_path": "ml/train"},
    )
    token = issuer.token(aud="https://console.example.test", sub="job", project_path="ml/train")
    federation._jwks(issuer.url, refresh=True)  # read now and kept JWKS_CACHE_S: the issuer can stop here
    issuer.close()
    return token


@case("api:token-exchange", "post", setup=_a_trusting_pipeline)
def _(personas, api, client, token):
    body = {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": token,
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
    }
    return api().post("/api/v1/token-exchange/", body, format="json")


def _a_trust(personas):
    from apps.accounts.services import create_federated_trust

    return create_federated_trust(
        personas.tenant_admin_a,
        service_account=personas.ci_a,
        issuer="https://gitlab.example.test",
        audience="https://console.example.test",
    )


@case("api:federated-trust-list", "post")
def _(personas, api, client):
    return _api(api, personas, "tenant_admin_a").post(
        "/api/v1/federated-trusts/",
        {"service_account": "ci-a", "issuer": "https://gitlab.example.test", "audience": "https://c.example.test"},
        format="json",
    )


@case("api:federated-trust-detail", "delete", setup=_a_trust)
def _(personas, api, client, trust):
    return _api(api, personas, "tenant_admin_a").delete(f"/api/v1/federated-trusts/{trust.pk}/")


@case("api:service-account-list", "post")
def _(personas, api, client):
    return _api(api, personas, "tenant_admin_a").post(
        "/api/v1/service-accounts/", {"username": "ci-new", "tenant": "a", "role": "member"}, format="json"
    )


@case("api:token-list", "post")
def _(personas, api, client):
    return _api(api, personas, "member_a").post(
        "/api/v1/tokens/", {"name": "n", "tenant": "a", "role": "member"}, format="json"
    )


@case("api:token-revoke", "post")
def _(personas, api, client):
    return _api(api, personas, "tenant_admin_a").post(
        f"/api/v1/tokens/{personas.token_a.pk}/revoke/", {}, format="json"
    )


@case("api:cluster-list", "post")
def _(personas, api, client):
    shape = {"nodes": 2, "gpus_per_node": 2, "models": {"a100": 1.0}, "seed": 1}
    return _api(api, personas).post(
        "/api/v1/clusters/", {"name": "sim-new", "kind": "simulated", "connection": shape}, format="json"
    )


@case("api:cluster-detail", "patch")
def _(personas, api, client):
    _walk_cluster()
    return _api(api, personas).patch("/api/v1/clusters/walk/", {"description": "lab fleet"}, format="json")


@case("api:cluster-detail", "delete")
def _(personas, api, client):
    _walk_cluster()
    return _api(api, personas).delete("/api/v1/clusters/walk/?reason=decommissioned")


@case("api:cluster-sync", "post")
def _(personas, api, client):
    _walk_cluster()
    return _api(api, personas, "oncall").post("/api/v1/clusters/walk/sync/", {}, format="json")


@case("api:cluster-quota-push", "post")
def _(personas, api, client):
    _walk_cluster()
    return _api(api, personas).post("/api/v1/clusters/walk/quota-push/", {"reason": "push now"}, format="json")


def _walk_pool(personas):
    from apps.fleet.models import NodePool

    pool, _created = NodePool.objects.get_or_create(cluster=_walk_cluster(), name="walk")
    return pool


@case("api:pool-detail", "patch", setup=_walk_pool)
def _(personas, api, client, pool):
    return _api(api, personas).patch(
        f"/api/v1/pools/{pool.pk}/",
        {"fabric": "infiniband", "rdma_resource": "rdma/ib", "nccl_ib_hca": "mlx5", "reason": "HDR fabric"},
        format="json",
    )


@case("api:pool-prepull", "put", setup=_walk_pool)
def _(personas, api, client, pool):
    return _api(api, personas).put(
        f"/api/v1/pools/{pool.pk}/prepull/", {"images": ["lmsysorg/sglang:v0.5.3"], "reason": "warm"}, format="json"
    )


@case("fleet:pool_prepull", "post", setup=_walk_pool)
def _(personas, api, client, pool):
    return _logged_in(client, personas, "platform_admin").post(
        reverse("fleet:pool_prepull", args=["walk", pool.name]), {"images": "lmsysorg/sglang:v0.5.3\n"}
    )


@case("api:sim-fault-list", "post")
def _(personas, api, client):
    _walk_cluster()
    return _api(api, personas, "oncall").post(
        "/api/v1/simulator/faults/", {"cluster": "walk", "node": "gpu-0001", "kind": "xid79", "gpu": 1}, format="json"
    )


def _inject_thermal(personas):
    from apps.backends.simulator.services import inject_fault

    return inject_fault(None, _walk_cluster(), "gpu-0001", "thermal", 0)


@case("api:sim-fault-detail", "delete", setup=_inject_thermal)
def _(personas, api, client, fault):
    return _api(api, personas, "oncall").delete(f"/api/v1/simulator/faults/{fault.pk}/?reason=fixed")


@case("api:sim-advance", "post")
def _(personas, api, client):
    _walk_cluster()
    return _api(api, personas, "oncall").post(
        "/api/v1/simulator/advance/", {"cluster": "walk", "minutes": 5}, format="json"
    )


@case("fleet:cluster_list", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "platform_admin").post(
        reverse("fleet:cluster_list"),
        {"name": "sim-html", "kind": "simulated", "connection": '{"nodes": 2, "models": {"l40s": 1}}'},
    )


@case("fleet:cluster_sync", "post")
def _(personas, api, client):
    _walk_cluster()
    return _logged_in(client, personas, "oncall").post(reverse("fleet:cluster_sync", args=["walk"]))


@case("fleet:cluster_quota_push", "post")
def _(personas, api, client):
    _walk_cluster()
    return _logged_in(client, personas, "platform_admin").post(
        reverse("fleet:cluster_quota_push", args=["walk"]), {"dry_run": "1"}
    )


@case("fleet:cluster_quota_drift", "post")
def _(personas, api, client):
    _walk_cluster()
    return _logged_in(client, personas, "oncall").post(reverse("fleet:cluster_quota_drift", args=["walk"]))


@case("fleet:node_fault", "post")
def _(personas, api, client):
    _walk_cluster()
    return _logged_in(client, personas, "oncall").post(
        reverse("fleet:node_fault", args=["walk", "gpu-0001"]), {"kind": "nvlink", "gpu": "0", "reason": "drill"}
    )


def _queue(personas, with_quota=True):
    from apps.fleet.models import GpuModel
    from apps.tenancy.models import GuaranteeCap, Queue, Quota

    queue, _ = Queue.objects.get_or_create(tenant=personas.a, name="train")
    h100 = GpuModel.objects.get(code="h100")
    GuaranteeCap.objects.get_or_create(tenant=personas.a, gpu_model=h100, defaults={"guaranteed": 64})
    if with_quota:
        Quota.objects.get_or_create(queue=queue, gpu_model=h100, defaults={"guaranteed": 8})
    return queue


def _quota_request(personas):
    from apps.fleet.models import GpuModel
    from apps.tenancy.models import QuotaRequest

    return QuotaRequest.objects.create(
        queue=_queue(personas),
        gpu_model=GpuModel.objects.get(code="h100"),
        guaranteed=16,
        justification="70B pretraining",
    )


@case("api:queue-list", "post")
def _(personas, api, client):
    return _api(api, personas, "tenant_admin_a").post(
        "/api/v1/queues/", {"tenant": "a-team", "name": "infer"}, format="json"
    )


@case("api:queue-detail", "patch", setup=_queue)
def _(personas, api, client, queue):
    return _api(api, personas, "tenant_admin_a").patch(
        f"/api/v1/queues/{queue.pk}/", {"description": "x"}, format="json"
    )


@case("api:queue-detail", "delete", setup=_queue)
def _(personas, api, client, queue):
    return _api(api, personas, "tenant_admin_a").delete(f"/api/v1/queues/{queue.pk}/")


@case("api:queue-bind", "post", setup=_queue)
def _(personas, api, client, queue):
    return _api(api, personas).post(
        f"/api/v1/queues/{queue.pk}/bind/", {"cluster": "walk", "namespaces": ["a-train"]}, format="json"
    )


@case("api:quota-list", "post", setup=_queue)
def _(personas, api, client, queue):
    return _api(api, personas, "tenant_admin_a").post(
        "/api/v1/quotas/", {"queue": queue.pk, "gpu_model": "h100", "guaranteed": 16, "lend_limit": 8}, format="json"
    )


@case("api:budget-list", "post")
def _(personas, api, client):
    return _api(api, personas).post(
        "/api/v1/budgets/", {"tenant": "b", "gpu_model": "a100", "guaranteed": 32}, format="json"
    )


@case("api:tier-detail", "patch")
def _(personas, api, client):
    return _api(api, personas).patch("/api/v1/tiers/exploratory/", {"value": 150}, format="json")


@case("api:quota-request-list", "post", setup=_queue)
def _(personas, api, client, queue):
    return _api(api, personas, "tenant_admin_a").post(
        "/api/v1/quota-requests/",
        {"queue": queue.pk, "gpu_model": "h100", "guaranteed": 24, "justification": "new 70B run"},
        format="json",
    )


@case("api:quota-request-decide", "post", setup=_quota_request)
def _(personas, api, client, request):
    return _api(api, personas).post(
        f"/api/v1/quota-requests/{request.pk}/decide/",
        {"approve": True, "granted": 12, "reason": "half now"},
        format="json",
    )


@case("tenancy:quota_requests", "post", setup=_queue)
def _(personas, api, client, queue):
    return _logged_in(client, personas, "tenant_admin_a").post(
        reverse("tenancy:quota_requests"),
        {"action": "request", "queue": queue.pk, "gpu_model": "h100", "guaranteed": 12, "justification": "eval"},
    )


@case("tenancy:queue_detail", "post", setup=_queue)
def _(personas, api, client, queue):
    return _logged_in(client, personas, "tenant_admin_a").post(
        reverse("tenancy:queue_detail", args=[queue.pk]),
        {"gpu_model": "h100", "guaranteed": 10, "weight": 1, "action": "apply"},
    )


@case("tenancy:tiers", "post")
def _(personas, api, client):
    from apps.tenancy.models import PriorityTier

    tier = PriorityTier.objects.get(name="periodic")
    return _logged_in(client, personas, "platform_admin").post(
        reverse("tenancy:tiers"), {"tier": tier.pk, "value": 801, "preemptible": "on", "may_borrow": "on"}
    )


def _workload_queue(personas):
    """Tenant A's queue "train" bound to the walk cluster with H100 quota."""
    from apps.fleet.services import sync_inventory
    from apps.tenancy.models import QueueBinding

    queue = _queue(personas)
    cluster = _walk_cluster()
    sync_inventory(cluster.pk)
    QueueBinding.objects.get_or_create(queue=queue, cluster=cluster, defaults={"namespaces": ["a-train"]})
    return queue


def _spec(name="walk-job"):
    return {
        "name": name,
        "tenant": "a",
        "queue": "train",
        "tier": "training",
        "image": "busybox:1.36",
        "command": ["true"],
        "workers": 1,
        "gpus_per_worker": 1,
        "gpu_model": "h100",
    }


def _workload(personas):
    from apps.workloads.services import submit_workload

    _workload_queue(personas)
    workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=_spec("to-cancel"))
    return workload


def _template(personas):
    from apps.workloads.services import save_template

    _workload_queue(personas)
    spec = _spec("tpl-job")
    del spec["tenant"]
    return save_template(fresh(personas.tenant_admin_a), tenant=personas.a, name="t", kind="training", spec=spec)


@case("api:workload-list", "post", setup=_workload_queue)
def _(personas, api, client, queue):
    return _api(api, personas, "member_a").post(
        "/api/v1/workloads/", {"kind": "training", "spec": _spec()}, format="json", HTTP_IDEMPOTENCY_KEY="walk"
    )


@case("api:workload-cancel", "post", setup=_workload)
def _(personas, api, client, workload):
    return _api(api, personas, "member_a").post(f"/api/v1/workloads/{workload.pk}/cancel/", {}, format="json")


@case("api:template-list", "post", setup=_workload_queue)
def _(personas, api, client, queue):
    spec = _spec()
    del spec["tenant"]
    return _api(api, personas, "member_a").post(
        "/api/v1/templates/", {"tenant": "a", "name": "n", "kind": "training", "spec": spec}, format="json"
    )


@case("api:template-submit", "post", setup=_template)
def _(personas, api, client, template):
    return _api(api, personas, "member_a").post(
        f"/api/v1/templates/{template.pk}/submit/", {"overrides": {}}, format="json"
    )


@case("workloads:workload_submit", "post", setup=_workload_queue)
def _(personas, api, client, queue):
    import json

    return _logged_in(client, personas, "member_a").post(
        reverse("workloads:workload_submit"), {"kind": "training", "spec": json.dumps(_spec("html-job"))}
    )


@case("workloads:workload_cancel", "post", setup=_workload)
def _(personas, api, client, workload):
    return _logged_in(client, personas, "member_a").post(reverse("workloads:workload_cancel", args=[workload.pk]))


def _service(personas):
    """An inference service of tenant A on the walk cluster (admitted; its SLO is what the cases change)."""
    from apps.workloads.services import submit_workload

    _workload_queue(personas)
    spec = {
        "name": "walk-svc",
        "tenant": "a",
        "queue": "train",
        "engine": "vllm",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
    }
    workload, _ = submit_workload(fresh(personas.member_a), kind="inference", spec=spec)
    return workload


@case("api:service-slo", "put", setup=_service)
def _(personas, api, client, service):
    return _api(api, personas, "tenant_admin_a").put(
        f"/api/v1/services/{service.pk}/slo/", {"ttft_target_s": 1.5, "reason": "chat"}, format="json"
    )


@case("inference:service_slo", "post", setup=_service)
def _(personas, api, client, service):
    return _logged_in(client, personas, "tenant_admin_a").post(
        reverse("inference:service_slo", args=[service.pk]),
        {"ttft_target_s": "2.5", "tpot_target_s": "0.08", "objective": "0.99"},
    )


def _walk_node(personas):
    from apps.fleet.models import Node

    _walk_cluster()
    return Node.objects.get(cluster__name="walk", name="gpu-0001")


for _action in ("cordon", "uncordon", "drain", "resume", "request-reset", "mark-rma"):

    def _node_case(personas, api, client, node, _action=_action):
        return _api(api, personas, "oncall").post(
            f"/api/v1/nodes/{node.pk}/{_action}/", {"reason": "runbook drill"}, format="json"
        )

    case(f"api:node-{_action}", "post", setup=_walk_node)(_node_case)


def _incident(personas):
    from django.utils import timezone

    from apps.health.models import Incident

    now = timezone.now()
    return Incident.objects.create(
        node=_walk_node(personas),
        cause="xid-79",
        rule_key="xid-fatal",
        ruleset_version=1,
        title="GPU off the bus",
        severity="fatal",
        action="drain",
        detected_at=now,
        last_seen_at=now,
    )


@case("api:incident-transition", "post", setup=_incident)
def _(personas, api, client, incident):
    return _api(api, personas, "oncall").post(
        f"/api/v1/incidents/{incident.pk}/transition/", {"to": "isolating", "reason": "cordoning"}, format="json"
    )


def _rules(personas):
    from apps.health.services.rulesets import active_ruleset

    return active_ruleset()


@case("api:health-rule-detail", "patch", setup=_rules)
def _(personas, api, client, ruleset):
    return _api(api, personas).patch("/api/v1/health-rules/power-brake/", {"severity": "critical"}, format="json")


@case("api:telemetry-source-list", "post")
def _(personas, api, client):
    _walk_cluster()
    return _api(api, personas).post(
        "/api/v1/telemetry-sources/",
        {"cluster": "walk", "kind": "exporter", "url_pattern": "http://{node}:9400/metrics"},
        format="json",
    )


@case("api:notification-channel-list", "post")
def _(personas, api, client):
    return _api(api, personas, "tenant_admin_a").post(
        "/api/v1/notification-channels/", {"tenant": "a", "kind": "email", "target": "a@example.com"}, format="json"
    )


def _channel(personas):
    from apps.notifications.models import NotificationChannel

    return NotificationChannel.objects.create(kind="email", target="oncall@example.com")


@case("api:notification-channel-detail", "delete", setup=_channel)
def _(personas, api, client, channel):
    return _api(api, personas).delete(f"/api/v1/notification-channels/{channel.pk}/?reason=rotated")


@case("api:isolation-policy-list", "post")
def _(personas, api, client):
    return _api(api, personas).post(
        "/api/v1/isolation-policies/",
        {"cordon_severities": ["fatal"], "drain_severities": [], "max_nodes_per_hour": 2, "max_percent_per_hour": 5},
        format="json",
    )


@case("health:incident_transition", "post", setup=_incident)
def _(personas, api, client, incident):
    return _logged_in(client, personas, "oncall").post(
        reverse("health:incident_transition", args=[incident.pk]), {"to": "isolating", "reason": "cordoning"}
    )


@case("health:node_action", "post", setup=_walk_node)
def _(personas, api, client, node):
    return _logged_in(client, personas, "oncall").post(
        reverse("health:node_action", args=[node.pk]), {"action": "cordon", "reason": "drill"}
    )


@case("health:rules", "post", setup=_rules)
def _(personas, api, client, ruleset):
    return _logged_in(client, personas, "platform_admin").post(
        reverse("health:rules"),
        {
            "key": "power-brake",
            "severity": "critical",
            "action": "alert",
            "enabled": "on",
            "params": '{"metric": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "mask": 128}',
        },
    )


@case("login", "post")
def _(personas, api, client):
    return client.post(reverse("login"), {"username": "member-a", "password": PASSWORD})


@case("logout", "post")
def _(personas, api, client):
    client.force_login(personas.member_a)
    return client.post(reverse("logout"))


def _logged_in(client, personas, who):
    client.force_login(personas.user(who))
    return client


@case("accounts:memberships", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "tenant_admin_a").post(
        reverse("accounts:memberships"), {"user": "member-b", "tenant": personas.a_team.pk, "role": "viewer"}
    )


@case("accounts:membership_change", "post")
def _(personas, api, client):
    m = Membership.objects.get(user=personas.member_a, tenant=personas.a)
    return _logged_in(client, personas, "tenant_admin_a").post(
        reverse("accounts:membership_change", args=[m.pk]), {"role": "viewer"}
    )


@case("accounts:membership_revoke", "post")
def _(personas, api, client):
    m = Membership.objects.get(user=personas.member_a, tenant=personas.a)
    return _logged_in(client, personas, "tenant_admin_a").post(reverse("accounts:membership_revoke", args=[m.pk]))


@case("accounts:service_account_create", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "tenant_admin_a").post(
        reverse("accounts:service_account_create"), {"username": "ci-html", "tenant": personas.a.pk, "role": "member"}
    )


@case("accounts:tokens", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "member_a").post(
        reverse("accounts:tokens"), {"name": "html", "tenant": personas.a.pk, "role": "member", "expires_in_days": 5}
    )


@case("accounts:token_revoke", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "tenant_admin_a").post(
        reverse("accounts:token_revoke", args=[personas.token_a.pk]), {"reason": "rotate"}
    )


@case("tenancy:tenant_create", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "tenant_admin_a").post(
        reverse("tenancy:tenant_create"), {"name": "New", "slug": "new-team", "parent": personas.a.pk}
    )


@case("tenancy:tenant_detail", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "tenant_admin_a").post(
        reverse("tenancy:tenant_detail", args=["a-team"]),
        {"name": "Team A1 renamed", "slug": "a-team", "parent": personas.a.pk, "description": "d"},
    )


@case("tenancy:tenant_archive", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "platform_admin").post(
        reverse("tenancy:tenant_archive", args=["a-team"]), {"reason": "disbanded"}
    )


#
# Chargeback
#


def _last_month_period(close: bool = False):
    from datetime import timedelta

    from django.utils import timezone

    from apps.chargeback.models import Period
    from apps.chargeback.periods import month_start, next_month

    start = month_start(month_start(timezone.now()) - timedelta(days=1))
    period, _ = Period.objects.get_or_create(start=start, defaults={"end": next_month(start)})
    if close:
        from apps.chargeback.services import close_period

        close_period(fresh(personas_admin(period)), period)
    return period


def personas_admin(_period):
    from apps.accounts.models import User

    return User.objects.get(username="root")


def _workload_on_walk(personas):
    from apps.fleet.models import GpuModel
    from apps.tenancy import services as tenancy
    from apps.tenancy.models import PriorityTier
    from apps.workloads.models import Workload

    queue = tenancy.create_queue(fresh(personas.platform_admin), tenant=personas.a, name="credits")
    workload = Workload.objects.create(
        kind="training",
        name="hit",
        tenant=personas.a,
        queue=queue,
        tier=PriorityTier.objects.get(name="training"),
        cluster=_walk_cluster(),
        gpu_model=GpuModel.objects.get(code="h100"),
        gpus=8,
        spec={},
    )
    Workload.objects.filter(pk=workload.pk).update(backend_name=f"wl{workload.pk}-hit")  # the console's naming rule
    workload.refresh_from_db()
    return workload


@case("api:period-close", "post", setup=lambda personas: _last_month_period())
def _(personas, api, client, period):
    return _api(api, personas).post(f"/api/v1/periods/{period.pk}/close/", {"reason": "month end"}, format="json")


@case("api:period-reopen", "post", setup=lambda personas: _last_month_period(close=True))
def _(personas, api, client, period):
    return _api(api, personas).post(f"/api/v1/periods/{period.pk}/reopen/", {"reason": "late usage"}, format="json")


@case("api:rate-card-list", "post")
def _(personas, api, client):
    return _api(api, personas).post(
        "/api/v1/rate-cards/",
        {"gpu_model": "h100", "rate": "2.50", "effective_from": "2020-01-01T00:00Z"},
        format="json",
    )


@case("api:spend-budget-list", "post")
def _(personas, api, client):
    return _api(api, personas, "tenant_admin_a").post(
        "/api/v1/spend-budgets/", {"tenant": "a-team", "monthly_amount": "5000.00"}, format="json"
    )


@case("api:credit-list", "post", setup=_workload_on_walk)
def _(personas, api, client, workload):
    return _api(api, personas, "oncall").post(
        "/api/v1/credits/",
        {
            "cluster": "walk",
            "backend_ids": [workload.backend_name],
            "interrupted_at": "2099-01-01T00:00Z",
            "reason": "XID 79",
            "incident_ref": "INC-1",
        },
        format="json",
    )


@case("chargeback:period_list", "post", setup=lambda personas: _last_month_period())
def _(personas, api, client, period):
    return _logged_in(client, personas, "platform_admin").post(
        reverse("chargeback:period_list"), {"period": period.pk, "action": "close", "reason": "month end"}
    )


@case("chargeback:rate_cards", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "platform_admin").post(
        reverse("chargeback:rate_cards"),
        {"gpu_model": "a100", "tier": "", "rate": "1.25", "effective_from": "2020-01-01T00:00", "note": "list price"},
    )


@case("chargeback:tenant_spend", "post")
def _(personas, api, client):
    return _logged_in(client, personas, "platform_admin").post(
        reverse("chargeback:tenant_spend", args=["a"]),
        {"monthly_amount": "10000", "thresholds": "50, 80, 100", "block_preemptible_when_over": "on"},
    )


def test_every_state_changing_endpoint_has_a_case(personas, client):
    found = discover(personas, client)
    missing = sorted(found - set(CASES) - set(EXEMPT))
    assert not missing, f"state-changing endpoints without an audit case: {missing}"
    stale = sorted(set(CASES) - found)
    assert not stale, f"cases for endpoints that no longer exist or no longer accept the method: {stale}"


@pytest.mark.parametrize("key", sorted(CASES), ids=lambda k: f"{k[0]}:{k[1]}")
def test_change_writes_exactly_one_audit_event(personas, api, client, key):
    _walk_cluster()  # fleet cases act on it; creating it is setup, not the change under test
    setup = SETUPS.get(key)
    extra = (setup(personas),) if setup else ()
    before = AuditEvent.objects.count()
    last_id = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first()
    response = CASES[key](personas, api, client, *extra)
    assert response.status_code in {200, 201, 202, 204, 302}, getattr(response, "content", b"")[:500]
    if response.status_code == 302:  # HTML forms redirect on success; errors re-render with 200
        assert "messages" not in response.cookies or "error" not in str(response.cookies["messages"].value)
    new = list(AuditEvent.objects.filter(id__gt=last_id or 0))
    assert AuditEvent.objects.count() == before + 1, [(e.action, e.target_label) for e in new]
    event = new[0]
    assert event.actor_label and event.action and event.target_type and event.request_id


def test_html_form_error_rerenders_without_audit(personas, client):
    """The HTML create forms answer bad input with 200 and field errors, writing nothing."""
    before = AuditEvent.objects.count()
    response = _logged_in(client, personas, "tenant_admin_a").post(
        reverse("tenancy:tenant_create"), {"name": "X", "slug": "Bad Slug!", "parent": personas.a.pk}
    )
    assert response.status_code == 200
    assert "DNS-1123" in response.content.decode()
    assert AuditEvent.objects.count() == before
