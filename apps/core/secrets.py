"""The secret a cluster's `secret_env` names: read from the console's environment, only under a prefix.

A cluster's token, kubeconfig or JWT is never stored in the database: `Cluster.secret_env` names the environment
variable of the console's processes that holds it, and the backend sends it to the cluster (a bearer token to
`api_url`, a JWT to `restd_url`). So that a platform admin cannot name one of the console's own variables
(`SECRET_KEY`, `DATABASE_URL`, `DEBUG`, ...) and have it sent out, a name is accepted only when it starts with
`settings.SECRET_ENV_PREFIX` (default `GPUC_SECRET_`) and is not a variable or setting of the console: when the
cluster is saved (a 400 naming `secret_env`) and again whenever the secret is read (rows saved before).
"""

from __future__ import annotations

import os
import re

from django.conf import settings

_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")


class SecretEnvRefused(ValueError):
    """The name may not be read as a cluster's secret."""


def secret_env_error(name: str) -> str:
    """Why `name` may not name a cluster's secret ('' if it may)."""
    prefix = settings.SECRET_ENV_PREFIX
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return "An environment variable name: A-Z, 0-9 and _."
    if not name.startswith(prefix) or name == prefix:
        return f"Must start with {prefix} (the deployment's SECRET_ENV_PREFIX), e.g. {prefix}K8S_PROD_TOKEN."
    if name in settings.SETTINGS_ENV_NAMES or hasattr(settings, name):
        return f"{name} is one of the console's own settings, never a cluster's secret."
    return ""


def read_secret_env(name: str) -> str:
    """The value of the variable `name` ('' when unset); SecretEnvRefused when the name is not allowed."""
    problem = secret_env_error(name)
    if problem:
        raise SecretEnvRefused(f"secret_env {name!r}: {problem}")
    return os.environ.get(name, "")
