"""`secret_env`: environment variables whose values stay in Kubernetes Secrets; the console keeps the reference.

Each item is {name, secret, key}: the variable (a name `env` could hold, and not also in `env`), the Secret in
the workload's namespace (a DNS subdomain, as Kubernetes names Secrets) and the key of its data (letters,
digits, '-', '_' and '.', at most 253, not "." or ".." nor starting with "..", as Kubernetes allows). On
Kubernetes it becomes env valueFrom.secretKeyRef (https://kubernetes.io/docs/concepts/configuration/secret/
#using-secrets-as-environment-variables): the kubelet reads the value when it starts the container, and a pod
whose Secret or key is missing does not start (CreateContainerConfigError) rather than run without it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict

from apps.backends.render.spec import SecretEnv
from apps.core.text import N_
from apps.workloads.specs.checks import ENV_NAME, env_name_error, secret_key_error, secret_name_error
from apps.workloads.specs.fields import Check, Problems, SpecModel, described

MAX_SECRET_ENV = 64


class SecretEnvModel(SpecModel):
    model_config = ConfigDict(title="SecretEnv")
    SPEC = SecretEnv

    name: Annotated[str, Check(env_name_error, (("maxLength", 128), ("pattern", f"^{ENV_NAME}$")))] = described(
        N_("Variable"), N_("e.g. HF_TOKEN")
    )
    secret: Annotated[str, Check(secret_name_error, (("maxLength", 253),))] = described(
        N_("Secret"), N_("The Secret's name in its namespace")
    )
    key: Annotated[str, Check(secret_key_error, (("maxLength", 253),))] = described(
        N_("Key"), N_("The key in the Secret's data")
    )


def secret_env_problems(problems: Problems, items: list[SecretEnvModel], env: dict[str, str]) -> None:
    """A variable has one value: not also in env, not twice in secret_env."""
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if item.name in env:
            problems.add((i, "name"), N_("%(name)s is also in env: a variable has one value", name=item.name))
        elif item.name in seen:
            problems.add(
                (i, "name"), N_("%(name)s is already secret_env[%(index)s]", name=item.name, index=seen[item.name])
            )
        else:
            seen[item.name] = i
