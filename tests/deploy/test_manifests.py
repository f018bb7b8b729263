"""deploy/kubernetes renders, with `kubectl kustomize`, into objects a strict API server of 1.31 to 1.35 accepts, and
into the deployment docs/deploy-kubernetes.md describes: hardened pods, probes, rollouts without downtime, the Celery
queues split as settings route them, beat twice, budgets, autoscalers, network policies, metrics."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path

import jsonschema
import pytest
from django.conf import settings

from apps.backends.kubernetes.nodes import DrainSettings
from apps.backends.render import validate
from console.celery import app as celery_app
from tests.deploy.conftest import KUBERNETES, OVERLAYS
from tests.deploy.manifests import console_pods, containers, find, matches, pods, settings_config_map

SERVICE_MONITOR_SCHEMA = Path(__file__).parent / "schemas" / "monitoring.coreos.com_v1_servicemonitor.json"
SECRETS = {"gpu-console-secrets", "gpu-console-cluster-tokens", "gpu-console-postgres", "gpu-console-tls"}
# The keys of gpu-console-secrets that docs/deploy-kubernetes.md tells to create (OIDC_CLIENT_SECRET optional).
SECRET_KEYS = {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "METRICS_TOKEN", "OIDC_CLIENT_SECRET"}
DEPLOYMENTS = {"gpu-console-web", "gpu-console-worker", "gpu-console-worker-health", "gpu-console-beat"}

overlays = pytest.mark.parametrize("overlay", OVERLAYS)


def command(pod: dict, name: str) -> list[str]:
    (container,) = [c for c in pod["containers"] if c["name"] == name]
    return container["command"] + container.get("args", [])


@overlays
def test_every_object_is_valid_on_kubernetes_1_31_to_1_35(rendered, cached_schemas, overlay):
    assert validate.K8S_VERSIONS == ("1.31", "1.32", "1.33", "1.34", "1.35")
    objects = [o for o in rendered[overlay] if o["kind"] != "ServiceMonitor"]
    assert validate.validate_objects(objects) == []
    assert {o["kind"] for o in rendered[overlay]} >= {
        "Namespace", "ServiceAccount", "ConfigMap", "Job", "Deployment", "Service", "Ingress", "PodDisruptionBudget",
        "HorizontalPodAutoscaler", "NetworkPolicy",
    }  # fmt: skip


@cache
def service_monitor_validator() -> jsonschema.protocols.Validator:
    """The vendored ServiceMonitor schema (tests/deploy/schemas/SOURCES.md), closed: unknown fields are errors."""
    schema = json.loads(SERVICE_MONITOR_SCHEMA.read_text())
    schema = validate.close_schema(schema)
    schema["$defs"] = {name: validate.close_schema(d) for name, d in schema["$defs"].items()}
    return jsonschema.Draft202012Validator(schema)


def service_monitor_errors(obj: dict) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in service_monitor_validator().iter_errors(obj)]


def test_the_service_monitor_is_valid_against_the_prometheus_operator_crd(rendered):
    (monitor,) = [o for o in rendered["production"] if o["kind"] == "ServiceMonitor"]
    assert service_monitor_errors(monitor) == []
    assert not [o for o in rendered["dev"] if o["kind"] == "ServiceMonitor"]  # a trial cluster may lack the CRD
    # The check bites: a misspelt field and a malformed duration are refused.
    typo = copy.deepcopy(monitor)
    typo["spec"]["endpoints"][0]["scrapeIntervall"] = "30s"
    bad = copy.deepcopy(monitor)
    bad["spec"]["endpoints"][0]["interval"] = "30 seconds"
    assert service_monitor_errors(typo) and service_monitor_errors(bad)


def test_the_service_monitor_scrapes_the_web_service_with_the_metrics_token(rendered):
    objects = rendered["production"]
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    service = find(objects, "Service", "gpu-console-web")
    assert matches(monitor["spec"]["selector"], service["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert endpoint["authorization"]["credentials"] == {"name": "gpu-console-secrets", "key": "METRICS_TOKEN"}
    web = find(objects, "Deployment", "gpu-console-web")["spec"]["template"]["spec"]
    (container,) = web["containers"]
    token = next(e for e in container["env"] if e["name"] == "METRICS_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "gpu-console-secrets", "key": "METRICS_TOKEN"}


@overlays
def test_every_pod_is_hardened(rendered, overlay):
    for owner, pod in pods(rendered[overlay]):
        name = owner["metadata"]["name"]
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True, name
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in containers(pod):
            where = f"{name}/{container['name']}"
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            resources = container["resources"]
            assert set(resources["requests"]) >= {"cpu", "memory"} and set(resources["limits"]) >= {"cpu", "memory"}


@overlays
def test_the_web_tier_rolls_without_downtime_and_probes_itself(rendered, overlay):
    objects = rendered[overlay]
    web = find(objects, "Deployment", "gpu-console-web")
    assert web["spec"]["replicas"] >= 2
    assert web["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    (container,) = web["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    allowed = settings_config_map(objects)["ALLOWED_HOSTS"].split(",")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        host = {h["name"]: h["value"] for h in container[probe]["httpGet"]["httpHeaders"]}["Host"]
        assert host in allowed, f"{probe} sends Host: {host}, which ALLOWED_HOSTS refuses"
    ports = {p["name"] for p in container["ports"]}
    service = find(objects, "Service", "gpu-console-web")
    assert matches({"matchLabels": service["spec"]["selector"]}, web["spec"]["template"]["metadata"]["labels"])
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports


@overlays
def test_the_ingress_serves_the_allowed_host_over_tls(rendered, overlay):
    objects = rendered[overlay]
    ingress = find(objects, "Ingress", "gpu-console")
    config = settings_config_map(objects)
    (rule,) = ingress["spec"]["rules"]
    assert ingress["spec"]["tls"] == [{"hosts": [rule["host"]], "secretName": "gpu-console-tls"}]
    assert rule["host"] in config["ALLOWED_HOSTS"].split(",")
    assert f"https://{rule['host']}" in config["CSRF_TRUSTED_ORIGINS"].split(",")
    backend = rule["http"]["paths"][0]["backend"]["service"]
    service = find(objects, "Service", backend["name"])
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}


@overlays
def test_workers_consume_every_queue_as_the_settings_route_it(rendered, overlay):
    objects = rendered[overlay]
    consumed: dict[str, list[str]] = {}
    for name in ("gpu-console-worker", "gpu-console-worker-health"):
        argv = command(find(objects, "Deployment", name)["spec"]["template"]["spec"], "worker")
        assert argv[:4] == ["celery", "-A", "console", "worker"]
        for queue in argv[argv.index("-Q") + 1].split(","):
            consumed.setdefault(queue, []).append(name)
    assert set(consumed) == set(settings.CELERY_QUEUE_NAMES)
    assert all(len(by) == 1 for by in consumed.values()), consumed
    assert consumed["health"] == ["gpu-console-worker-health"]  # a scrape never waits behind a sync or a drain
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    scheduled = {entry["options"]["queue"] for entry in celery_app.conf.beat_schedule.values()}
    assert routed | scheduled <= set(consumed)


@overlays
def test_workers_finish_their_tasks_before_they_stop(rendered, overlay):
    objects = rendered[overlay]
    rest = find(objects, "Deployment", "gpu-console-worker")["spec"]["template"]["spec"]
    health = find(objects, "Deployment", "gpu-console-worker-health")["spec"]["template"]["spec"]
    # Drains run on the default queue: their PodDisruptionBudget retries last DrainSettings.timeout_s.
    assert rest["terminationGracePeriodSeconds"] > DrainSettings.timeout_s
    assert health["terminationGracePeriodSeconds"] > settings.HEALTH_SCRAPE_INTERVAL_S


@overlays
def test_beat_runs_twice_on_the_leased_scheduler(rendered, overlay):
    objects = rendered[overlay]
    beat = find(objects, "Deployment", "gpu-console-beat")
    assert beat["spec"]["replicas"] == 2
    argv = command(beat["spec"]["template"]["spec"], "beat")
    assert argv[:4] == ["celery", "-A", "console", "beat"]
    scheduler = argv[argv.index("--scheduler") + 1] if "--scheduler" in argv else settings.CELERY_BEAT_SCHEDULER
    assert scheduler == "apps.operations.beat:LeasedDatabaseScheduler"
    assert int(settings_config_map(objects)["BEAT_LEASE_S"]) >= 2


@overlays
def test_pods_wait_for_the_migration_job(rendered, overlay):
    objects = rendered[overlay]
    job = find(objects, "Job", "gpu-console-migrate")
    assert command(job["spec"]["template"]["spec"], "migrate") == ["python", "manage.py", "migrate", "--noinput"]
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == DEPLOYMENTS
    for deployment in deployments:
        inits = deployment["spec"]["template"]["spec"]["initContainers"]
        assert [c["command"][:3] for c in inits] == [["python", "manage.py", "wait_for_migrations"]]
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == inits[0]["image"]
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == inits[0]["image"]


@overlays
def test_budgets_and_autoscalers(rendered, overlay):
    objects = rendered[overlay]
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    for deployment in (o for o in objects if o["kind"] == "Deployment"):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        covering = [b for b in budgets if matches(b["spec"]["selector"], labels)]
        assert len(covering) == 1, f"{deployment['metadata']['name']}: {len(covering)} PodDisruptionBudgets"
    scaled = {}
    for hpa in (o for o in objects if o["kind"] == "HorizontalPodAutoscaler"):
        target = hpa["spec"]["scaleTargetRef"]
        find(objects, target["kind"], target["name"])
        scaled[target["name"]] = hpa["spec"]
    assert set(scaled) == {"gpu-console-web", "gpu-console-worker"}
    assert scaled["gpu-console-web"]["minReplicas"] >= 2
    for name, spec in scaled.items():  # CPU utilization needs a CPU request on every container
        pod = find(objects, "Deployment", name)["spec"]["template"]["spec"]
        assert all("cpu" in c["resources"]["requests"] for c in pod["containers"])
        assert spec["maxReplicas"] > spec["minReplicas"]


@overlays
def test_secrets_are_referenced_never_held(rendered, overlay):
    objects = rendered[overlay]
    assert not [o for o in objects if o["kind"] == "Secret"]
    keys = set()
    for _owner, pod in pods(objects):
        for container in containers(pod):
            for item in container.get("env", []):
                ref = item.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] in SECRETS
                    if ref["name"] == "gpu-console-secrets":
                        keys.add(ref["key"])
                        assert ref["key"] == item["name"]  # one key per variable, named alike
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    assert source["secretRef"] == {"name": "gpu-console-cluster-tokens", "optional": True}
    assert keys == SECRET_KEYS
    assert find(objects, "Ingress", "gpu-console")["spec"]["tls"][0]["secretName"] in SECRETS


@overlays
def test_network_policies(rendered, overlay):
    objects = rendered[overlay]
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    deny = policies["gpu-console-default-deny"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    # The web tier is reached from the Ingress controller's namespace (and Prometheus's): namespaces, never "anyone".
    web_ingress = policies["gpu-console-web-ingress"]["ingress"]
    assert web_ingress and all(peer.keys() == {"namespaceSelector"} for rule in web_ingress for peer in rule["from"])
    assert {port["port"] for rule in web_ingress for port in rule["ports"]} == {8000}
    # Egress: DNS for every console pod; the datastores and the API servers as each overlay places them.
    dns = policies["gpu-console-egress-dns"]["egress"]
    assert {(p["port"], p["protocol"]) for rule in dns for p in rule["ports"]} == {(53, "UDP"), (53, "TCP")}
    stores = policies["gpu-console-egress-datastores"]["egress"]
    assert {p["port"] for rule in stores for p in rule["ports"]} == {5432, 6379}
    clusters = policies["gpu-console-egress-clusters"]
    assert {p["port"] for rule in clusters["egress"] for p in rule["ports"]} == {443, 6443}
    for owner, pod in console_pods(objects):
        labels = owner["spec"]["template"]["metadata"]["labels"]
        egress = {n for n, spec in policies.items() if "Egress" in spec["policyTypes"] and spec.get("egress")}
        applies = {n for n in egress if matches(policies[n]["podSelector"], labels)}
        assert {"gpu-console-egress-dns", "gpu-console-egress-datastores"} <= applies, owner["metadata"]["name"]
        calls_clusters = labels["app.kubernetes.io/component"] in {"web", "worker", "worker-health"}
        assert ("gpu-console-egress-clusters" in applies) == calls_clusters, owner["metadata"]["name"]
        assert pod.get("automountServiceAccountToken", True) == calls_clusters, owner["metadata"]["name"]


@overlays
def test_the_grafana_dashboard_ships_as_a_config_map(rendered, overlay):
    board = find(rendered[overlay], "ConfigMap", "gpu-console-grafana-dashboard")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    source = KUBERNETES / "base" / "grafana" / "gpu-console.json"
    assert json.loads(board["data"]["gpu-console.json"]) == json.loads(source.read_text())
