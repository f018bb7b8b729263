"""A cluster's configuration cannot reach a shell or a secret it was not meant to, nor an address the outbound
policy refuses: bad input is a 400 naming the field and why, with nothing saved; a row saved before is refused
when used (test connection, sync), never run."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.backends.base import PermanentBackendError
from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.slurm.settings import SlurmSettings
from apps.backends.slurm.ssh import ssh_options_errors
from apps.fleet.models import Cluster
from tests.backends.k8s_fake import FakeKubernetes
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db

GOOD_SSH_OPTIONS = [
    "-i",
    "/etc/gpu-console/id_ed25519",
    "-p",
    "2222",
    "-o",
    "StrictHostKeyChecking=accept-new",
    "-oUserKnownHostsFile=/etc/gpu-console/known_hosts",
    "-o",
    "ConnectTimeout 10",
    "-o",
    "ServerAliveInterval=30",
    "-oIdentitiesOnly=yes",
    "-4",
]
BAD_SSH_OPTIONS = [
    (["-oProxyCommand=sh -c 'id > /tmp/pwned'"], "-o ProxyCommand is not allowed"),
    (["-o", "ProxyCommand=nc %h %p"], "-o ProxyCommand is not allowed"),
    (["-o", "proxycommand nc %h %p"], "-o proxycommand is not allowed"),
    (["-oLocalCommand=touch /tmp/x", "-oPermitLocalCommand=yes"], "-o LocalCommand is not allowed"),
    (["-o", "PermitLocalCommand=yes"], "-o PermitLocalCommand is not allowed"),
    (["-o", "KnownHostsCommand=/bin/true"], "-o KnownHostsCommand is not allowed"),
    (["-o", "Match=exec true"], "-o Match is not allowed"),
    (["-oProxyJump=jump01"], "-o ProxyJump is not allowed"),
    (["-J", "jump01"], "-J is not allowed"),
    (["-F", "/tmp/evil_config"], "-F is not allowed"),
    (["-E", "/etc/cron.d/x"], "-E is not allowed"),
    (["-L", "6379:127.0.0.1:6379"], "-L is not allowed"),
    (["-A"], "-A is not allowed"),
    (["-o", "IdentityFile=/x ProxyCommand=y"], "is not a value ssh_options accepts for identityfile"),
    (["-i", "$(id)"], "is not a value ssh_options accepts for identityfile"),
    (["-p", "22; id"], "is not a value ssh_options accepts for port"),
    (["-o", "StrictHostKeyChecking=ask"], "is not a value ssh_options accepts"),
    (["login02"], "is not an ssh option"),
    (["--", "id"], "is not an ssh option"),
    (["-i"], "-i needs a value"),
    ("-oProxyCommand=x", "must be a list of strings"),
]
BAD_SSH_HOSTS = ["-oProxyCommand=touch /tmp/x", "login01; id", "login 01", "user@-login01", "$(id)", "a`id`", ""]


@pytest.fixture
def production(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []


def post_cluster(api, personas, **body):
    return api(fresh(personas.platform_admin)).post("/api/v1/clusters/", {"name": "c1", **body}, format="json")


def assert_refused(response, field: str, text: str):
    assert response.status_code == 400, response.content
    error = response.json()
    assert text in error["fields"][field][0], error
    assert not Cluster.objects.filter(name="c1").exists()
    assert not AuditEvent.objects.filter(action="cluster.create").exists()


@pytest.mark.parametrize(("options", "problem"), BAD_SSH_OPTIONS)
def test_ssh_options_outside_the_allow_list_are_refused(personas, api, options, problem):
    response = post_cluster(
        api, personas, kind="slurm", connection={"ssh_host": "gpu-console@login01", "ssh_options": options}
    )
    assert_refused(response, "connection", f"ssh_options: {problem}" if problem.startswith("must") else problem)


def test_the_options_of_a_plain_connection_are_accepted(personas, api):
    assert ssh_options_errors(GOOD_SSH_OPTIONS) == []
    connection = {"ssh_host": "gpu-console@login01.example", "ssh_options": GOOD_SSH_OPTIONS}
    assert post_cluster(api, personas, kind="slurm", connection=connection).status_code == 201


@pytest.mark.parametrize("host", BAD_SSH_HOSTS)
def test_an_ssh_host_that_is_not_a_host_is_refused(personas, api, host):
    response = post_cluster(api, personas, kind="slurm", connection={"ssh_host": host or " "})
    assert_refused(response, "connection", "ssh_host:")


@pytest.mark.parametrize("host", ["login01", "gpu-console@login01.hpc.example", "svc_gpu@10.0.0.5", "fe80::1"])
def test_login_nodes_are_accepted(personas, api, host):
    assert post_cluster(api, personas, kind="slurm", connection={"ssh_host": host}).status_code == 201


@pytest.mark.parametrize(
    "connection",
    [
        {"ssh_host": "gpu-console@login01", "ssh_options": ["-oProxyCommand=touch {marker}"]},
        {"ssh_host": "-oProxyCommand=touch {marker}"},
        {"ssh_host": "gpu-console@login01", "ssh_options": ["-oPermitLocalCommand=yes", "-oLocalCommand=touch {m}"]},
    ],
    ids=["ProxyCommand option", "option as the host", "LocalCommand"],
)
def test_test_connection_never_runs_a_command_on_the_console_host(personas, api, tmp_path, connection):
    """A row saved before the allow-list (or written around the service): "Test connection" refuses to run ssh
    with it and says why; ssh would have run the command on the console's host."""
    marker = tmp_path / "ran"
    connection = {
        key: [v.replace("{marker}", str(marker)).replace("{m}", str(marker)) for v in value]
        if isinstance(value, list)
        else value.replace("{marker}", str(marker))
        for key, value in connection.items()
    }
    Cluster.objects.create(name="hpc", kind="slurm", connection={**connection, "timeout_s": 10})
    report = api(fresh(personas.platform_admin)).post("/api/v1/clusters/hpc/test-connection/", {}, format="json")
    assert report.status_code == 200
    assert not marker.exists(), "ssh ran a command on the console's host"
    assert report.json()["ok"] is False and "connection.ssh_" in report.json()["message"]


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("DEBUG", "Must start with GPUC_SECRET_"),
        ("SECRET_KEY", "Must start with GPUC_SECRET_"),
        ("DATABASE_URL", "Must start with GPUC_SECRET_"),
        ("K8S_PROD_TOKEN", "Must start with GPUC_SECRET_"),
        ("GPUC_SECRET_", "Must start with GPUC_SECRET_"),
    ],
)
def test_secret_env_names_only_variables_under_the_prefix(personas, api, name, problem):
    response = post_cluster(
        api, personas, kind="kubernetes", connection={"api_url": "https://k8s.example.com:6443"}, secret_env=name
    )
    assert_refused(response, "secret_env", problem)


def test_secret_env_never_names_a_setting_whatever_the_prefix(settings, personas, api):
    connection = {"api_url": "https://k8s.example.com:6443"}
    for prefix, name in (("SECRET", "SECRET_KEY"), ("DATABASE", "DATABASE_URL"), ("CELERY", "CELERY_BROKER_URL")):
        settings.SECRET_ENV_PREFIX = prefix
        response = post_cluster(api, personas, kind="kubernetes", connection=connection, secret_env=name)
        assert_refused(response, "secret_env", f"{name} is one of the console's own settings")


def test_a_secret_under_the_prefix_is_accepted(personas, api):
    response = post_cluster(
        api,
        personas,
        kind="kubernetes",
        connection={"api_url": "https://k8s.example.com:6443"},
        secret_env="GPUC_SECRET_K8S_PROD_TOKEN",
    )
    assert response.status_code == 201 and response.json()["secret_env"] == "GPUC_SECRET_K8S_PROD_TOKEN"


@pytest.mark.parametrize("name", ["DEBUG", "SECRET_KEY", "DATABASE_URL"])
def test_a_saved_cluster_never_sends_a_setting_as_its_token(monkeypatch, name):
    """A row saved before the prefix: the console's own variable is never read, so never sent to `api_url`."""
    monkeypatch.setenv("DEBUG", "1")
    monkeypatch.setenv("DATABASE_URL", "postgres://console:hunter2@db/console")
    fake = FakeKubernetes().start()
    try:
        cluster = Cluster.objects.create(
            name="k8s", kind="kubernetes", connection={"api_url": fake.url}, secret_env=name
        )
        with pytest.raises(PermanentBackendError, match="Must start with GPUC_SECRET_"):
            KubernetesBackend(cluster).inventory()
        assert fake.requests == []
    finally:
        fake.stop()
    slurm = Cluster(name="hpc", kind="slurm", connection={"restd_url": "http://slurm.example:6820"}, secret_env=name)
    with pytest.raises(PermanentBackendError, match="Must start with GPUC_SECRET_"):
        SlurmSettings.of(slurm)


@pytest.mark.parametrize(
    ("kind", "connection", "problem"),
    [
        ("kubernetes", {"api_url": "https://169.254.169.254:6443"}, "api_url: 169.254.169.254 is a link-local"),
        ("kubernetes", {"api_url": "https://localhost:6443"}, "api_url: localhost resolves to 127.0.0.1, a loopback"),
        ("kubernetes", {"api_url": "https://[fd00:ec2::254]/"}, "api_url: fd00:ec2::254 is a cloud metadata"),
        ("kubernetes", {"api_url": "file:///etc/passwd"}, "api_url: must be an http:// or https:// URL"),
        ("slurm", {"restd_url": "http://10.0.0.1:6820"}, "restd_url: 10.0.0.1 is a private"),
        ("slurm", {"restd_url": "http://[::1]:6820"}, "restd_url: ::1 is a loopback"),
        (
            "kubernetes",
            {"api_url": "https://k8s.example.com", "inference_metrics_url": "http://192.168.0.4:9000/{name}"},
            "inference_metrics_url: 192.168.0.4 is a private",
        ),
    ],
)
def test_cluster_urls_inside_the_network_are_refused_when_saved(production, personas, api, kind, connection, problem):
    assert_refused(post_cluster(api, personas, kind=kind, connection=connection), "connection", problem)


def test_the_deployment_allows_its_cluster_network(production, settings, personas, api):
    import ipaddress

    settings.OUTBOUND_ALLOWED_NETWORKS = [ipaddress.ip_network("10.0.0.0/8")]
    response = post_cluster(api, personas, kind="kubernetes", connection={"api_url": "https://10.0.0.1:6443"})
    assert response.status_code == 201


def test_the_api_server_address_is_checked_when_connecting(production):
    """A row saved before the policy (or a name that resolves elsewhere now): no request reaches the address."""
    fake = FakeKubernetes().start()
    try:
        fake.add_node("gpu-01", gpus=8)
        cluster = Cluster.objects.create(name="k8s", kind="kubernetes", connection={"api_url": fake.url})
        with pytest.raises(PermanentBackendError, match=r"127\.0\.0\.1 is a loopback address") as caught:
            KubernetesBackend(cluster).inventory()
        assert not caught.value.retryable and fake.requests == []
    finally:
        fake.stop()


def test_the_api_server_is_reached_where_allowed(settings):
    """Loopback allowed (as the suite does): the same fake answers through the pinned connection."""
    fake = FakeKubernetes().start()
    try:
        fake.add_node("gpu-01", gpus=8)
        cluster = Cluster.objects.create(name="k8s", kind="kubernetes", connection={"api_url": fake.url})
        assert [n.name for n in KubernetesBackend(cluster).inventory().nodes] == ["gpu-01"]
    finally:
        fake.stop()


def test_slurmrestd_is_checked_when_called(production, monkeypatch):
    from apps.backends.slurm.backend import SlurmBackend
    from tests.health.http_helpers import serve

    monkeypatch.setenv("GPUC_SECRET_JWT", "jwt")
    with serve({"/slurm/v0.0.38/ping": (200, {"pings": []})}) as server:
        cluster = Cluster(name="hpc", kind="slurm", connection={"restd_url": server.url}, secret_env="GPUC_SECRET_JWT")
        with pytest.raises(PermanentBackendError, match=r"slurmrestd GET ping: 127\.0\.0\.1 is a loopback"):
            SlurmBackend(cluster).rest.get("ping")
        assert server.queries == []
