"""The environment the deployments give the console is exactly what console/settings.py reads.

The variables settings.py reads are found by reading its source (every call of a reader of `console.env` with the
variable's name), checked against what importing it actually read. Each deployment (the Kubernetes overlays'
console containers, docker-compose.yml's console services, and the image's own ENV under both) must pass every one
of them, but for the tunables below, whose defaults suit any deployment, and the two that are never set in one; and
pass nothing else, but the few variables that another program of the image reads (named with their reader). So a
setting added to settings.py fails here until the deployments pass it or it is named a tunable, and a variable the
settings stopped reading fails here until the deployments drop it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from tests.deploy.conftest import OVERLAYS, ROOT
from tests.deploy.manifests import console_pods, containers, env_names

READERS = {"env_str", "env_bool", "env_int", "env_list", "env_networks", "env_name_prefix", "_throttle_rate"}
# Readers that also take `<NAME>_FILE` (console/env.py's env_str, and the helpers built on it).
FILE_READERS = {"env_str", "env_name_prefix", "_throttle_rate"}

# Tunables: docs/configuration.md gives each a default that suits a deployment; set one where it must differ.
TUNABLES = {
    "ADMISSION_CAPACITY_CACHE_S", "OVERVIEW_CACHE_S", "REFERENCE_CACHE_S",
    "API_MAX_JSON_DEPTH", "API_MAX_PAGE_SIZE", "API_PAGE_SIZE", "API_TOKEN_LAST_USED_RESOLUTION_S",
    "API_TOKEN_MAX_LIFETIME_DAYS", "TOKEN_EXCHANGE_MAX_MINUTES",
    "API_THROTTLE_ANON", "API_THROTTLE_BAD_TOKEN", "API_THROTTLE_TOKEN", "API_THROTTLE_USER",
    "LOGIN_COOLOFF_MINUTES", "LOGIN_FAILURE_LIMIT", "LOCAL_LOGIN_BREAK_GLASS_USERS", "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "OIDC_BUTTON_LABEL", "OIDC_GROUPS_CLAIM", "OIDC_SCOPES", "OIDC_TIMEOUT_S", "OIDC_USERNAME_CLAIM",
    "CHARGEBACK_CURRENCY", "CHARGEBACK_IDLE_UTILIZATION_PCT", "EMAIL_BACKEND",
    "HEALTH_CORDON_INLINE", "HEALTH_QUIET_S", "HEALTH_ROLLUP_DAYS", "HEALTH_SCRAPE_INTERVAL_S",
    "HUNG_JOB_DUMP_COMMAND", "HUNG_JOB_DUMP_TIMEOUT_S",
    "INFERENCE_SCRAPE_INTERVAL_S", "INFERENCE_SCRAPE_TIMEOUT_S", "INFERENCE_TELEMETRY_RETENTION_DAYS",
    "LOGS_FOLLOW_MAX_S", "LOGS_FOLLOW_MAX_STREAMS", "LOGS_FOLLOW_MAX_WORKERS", "OUTBOX_LEASE_S",
    "FAN_OUT_STAMP_EXPIRY_S",
}  # fmt: skip
# Never in a deployment: the demo's and the tests' switches.
NEVER_SET = {"DEBUG", "CELERY_TASK_ALWAYS_EAGER"}
# Variables of the image's other programs, with the file that reads them.
READ_ELSEWHERE = {
    "WEB_CONCURRENCY": "gunicorn/config.py",  # gunicorn's worker processes
    "PROMETHEUS_MULTIPROC_DIR": "apps/observability/metrics.py",  # /metrics adds up the processes' own metrics
}
# The interpreter's and pip's variables in the image's ENV.
IMAGE_ONLY = re.compile(r"(PYTHON|PIP_)[A-Z_]*")


def settings_reads() -> set[str]:
    """Every variable console/settings.py reads, `_FILE` forms included."""
    tree = ast.parse((ROOT / "console" / "settings.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in READERS:
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
                if node.func.id in FILE_READERS:
                    names.add(f"{first.value}_FILE")
    return names


def image_env() -> set[str]:
    """The names the Dockerfile's ENV sets (every process of the image has them)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    names = set()
    for line in text.splitlines():
        if line.startswith("ENV "):
            names |= set(re.findall(r"([A-Z_][A-Z0-9_]*)=", line))
    return names


def kubernetes_passes(objects: list[dict]) -> set[str]:
    return {name for _owner, pod in console_pods(objects) for c in containers(pod) for name in env_names(c, objects)}


def compose_passes() -> set[str]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    names = set()
    for name, service in compose["services"].items():
        if service.get("image") == compose["x-console"]["image"]:
            names |= set(service["environment"])
        else:
            assert name in {"postgres", "redis"}, f"{name}: a service not of the console's image"
    return names


def unwanted(passed: set[str]) -> tuple[set[str], set[str]]:
    """(read but neither passed nor a tunable, passed but read by nothing), `_FILE` forms being optional."""
    read = settings_reads()
    passed = passed | image_env()
    plain = {name for name in read if not name.endswith("_FILE")}
    missing = plain - passed - TUNABLES - NEVER_SET
    stale = {n for n in passed - read - set(READ_ELSEWHERE) if not IMAGE_ONLY.fullmatch(n)}
    return missing, stale


def test_the_source_scan_finds_every_variable_the_settings_read():
    read = settings_reads()
    assert not settings.SETTINGS_ENV_NAMES - read, "settings.py read a variable the scan does not see"
    assert not {"SECRET_KEY", "SECRET_KEY_FILE", "DATABASE_URL", "BEAT_LEASE_S", "API_THROTTLE_TOKEN"} - read
    # The lists above name only variables the settings read.
    assert not (TUNABLES | NEVER_SET) - read


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kubernetes_passes_exactly_what_the_settings_read(rendered, overlay):
    passed = kubernetes_passes(rendered[overlay])
    missing, stale = unwanted(passed)
    assert not missing, f"settings.py reads {sorted(missing)}: pass them in the manifests, or name them tunables here"
    assert not stale, f"the manifests pass {sorted(stale)}, which nothing reads"
    assert not passed & NEVER_SET


def test_docker_compose_passes_exactly_what_the_settings_read():
    passed = compose_passes()
    missing, stale = unwanted(passed)
    assert not missing, f"settings.py reads {sorted(missing)}: pass them in docker-compose.yml, or name them tunables"
    assert not stale, f"docker-compose.yml passes {sorted(stale)}, which nothing reads"
    assert not passed & NEVER_SET


def test_the_check_finds_a_missing_and_a_stale_variable(rendered):
    passed = kubernetes_passes(rendered["production"])
    missing, stale = unwanted((passed - {"BEAT_LEASE_S"}) | {"CELERY_BROKER"})
    assert (missing, stale) == ({"BEAT_LEASE_S"}, {"CELERY_BROKER"})


def test_variables_read_elsewhere_are_read_there():
    import gunicorn

    readers = {"gunicorn/config.py": Path(gunicorn.__file__).parent / "config.py"}
    for name, reader in READ_ELSEWHERE.items():
        path = readers.get(reader, ROOT / reader)
        assert f'"{name}"' in path.read_text(), f"{reader} no longer reads {name}"


def test_every_variable_is_documented():
    documented = (ROOT / "docs" / "configuration.md").read_text()
    missing = [n for n in settings_reads() if not n.endswith("_FILE") and f"`{n}`" not in documented]
    assert not missing, f"docs/configuration.md does not document {sorted(missing)}"
