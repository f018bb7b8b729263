"""An ApiClient for one cluster, from its non-secret `connection` settings and its secret.

Ways to connect (the first that applies wins):

* `in_cluster: true`: the service account the console's pod runs as (token and CA mounted by Kubernetes);
* `api_url` (+ `ca_file`, or `insecure_skip_tls_verify: true` for a test cluster only): the bearer token
  is the secret, read from the environment variable named by the cluster's `secret_env`;
* `kubeconfig` (a path) and optional `context`, or, when `secret_env` holds a whole kubeconfig, that
  kubeconfig (and `context`).

Other settings: `request_timeout_s` (default 30), `page_size` (default 500).
"""

from __future__ import annotations

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from urllib3.util.retry import Retry

from apps.backends.base import PermanentBackendError
from apps.core.outbound import OutboundRefused, pin_pool_manager, url_error
from apps.core.secrets import SecretEnvRefused, read_secret_env

DEFAULT_TIMEOUT_S = 30.0


def secret_of(cluster) -> str:
    """The cluster's secret from the console's environment; '' when it names none."""
    if not cluster.secret_env:
        return ""
    try:
        value = read_secret_env(cluster.secret_env)
    except SecretEnvRefused as exc:
        raise PermanentBackendError(f"cluster {cluster.name}: {exc}") from exc
    if not value:
        raise PermanentBackendError(
            f"cluster {cluster.name}: the environment variable {cluster.secret_env} (its secret_env) is not set "
            "in the console's processes"
        )
    return value


def _is_kubeconfig(text: str) -> bool:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and "clusters" in data


def configuration(cluster) -> k8s.Configuration:
    """The client Configuration for `cluster`; PermanentBackendError when the settings cannot work."""
    settings = cluster.connection or {}
    secret = secret_of(cluster)
    config = k8s.Configuration()
    try:
        if settings.get("in_cluster"):
            k8s_config.load_incluster_config(client_configuration=config)
        elif settings.get("api_url"):
            config.host = str(settings["api_url"]).rstrip("/")
            if secret:
                config.api_key = {"authorization": secret.strip()}
                config.api_key_prefix = {"authorization": "Bearer"}
            if settings.get("ca_file"):
                config.ssl_ca_cert = settings["ca_file"]
            if settings.get("insecure_skip_tls_verify"):
                config.verify_ssl = False
        elif secret and _is_kubeconfig(secret):
            k8s_config.load_kube_config_from_dict(
                yaml.safe_load(secret), context=settings.get("context") or None, client_configuration=config
            )
        elif settings.get("kubeconfig"):
            k8s_config.load_kube_config(
                config_file=settings["kubeconfig"], context=settings.get("context") or None, client_configuration=config
            )
        else:
            raise PermanentBackendError(
                f"cluster {cluster.name}: set one of connection.in_cluster, connection.api_url (token in secret_env), "
                "connection.kubeconfig, or put a kubeconfig in the variable secret_env names"
            )
    except (ConfigException, OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as exc:
        raise PermanentBackendError(f"cluster {cluster.name}: cannot load its connection settings: {exc}") from exc
    # Connection errors are retried twice here (a restarting API server); reads and writes are not retried
    # blindly: the backend maps them to retryable errors and the console's backoff decides.
    config.retries = Retry(total=2, connect=2, read=0, status=0, redirect=0, backoff_factor=0.2)
    return config


def connection_errors(connection: dict) -> list[str]:
    """`api_url` must be a URL the outbound policy lets the console call (checked again on every connection)."""
    api_url = connection.get("api_url")
    if api_url and (problem := url_error(str(api_url))):
        return [f"api_url: {problem}"]
    return []


def api_client(cluster) -> k8s.ApiClient:
    """The client for `cluster`. With `api_url` (an address from the console's database) every connection is
    made under the outbound policy (apps/core/outbound.py); the in-cluster service and kubeconfigs are the
    deployment's own files and environment, trusted as the deployment is."""
    client = k8s.ApiClient(configuration(cluster))
    settings = cluster.connection or {}
    if settings.get("api_url") and not settings.get("in_cluster"):
        try:
            pin_pool_manager(client.rest_client.pool_manager)
        except OutboundRefused as exc:
            raise PermanentBackendError(f"cluster {cluster.name}: {exc}") from exc
    return client


def timeout_of(cluster) -> float:
    try:
        return float((cluster.connection or {}).get("request_timeout_s", DEFAULT_TIMEOUT_S))
    except (TypeError, ValueError) as exc:
        raise PermanentBackendError(f"cluster {cluster.name}: connection.request_timeout_s must be a number") from exc
