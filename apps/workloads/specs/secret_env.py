"""`secret_env`: environment variables whose values stay in Kubernetes Secrets; the console keeps the reference.

Each item is {name, secret, key}: the variable (a name `env` could hold, and not also in `env`), the Secret in
the workload's namespace (a DNS subdomain, as Kubernetes names Secrets) and the key of its data (letters,
digits, '-', '_' and '.', at most 253, not "." or ".." nor starting with "..", as Kubernetes allows). On
Kubernetes it becomes env valueFrom.secretKeyRef (https://kubernetes.io/docs/concepts/configuration/secret/
#using-secrets-as-environment-variables): the kubelet reads the value when it starts the container, and a pod
whose Secret or key is missing does not start (CreateContainerConfigError) rather than run without it.
"""

from __future__ import annotations

import re

from apps.backends.render.names import is_dns_subdomain
from apps.backends.render.spec import SecretEnv
from apps.core.text import N_
from apps.workloads.specs.checks import env_name_error
from apps.workloads.specs.reader import Errors, Reader, type_name

MAX_SECRET_ENV = 64
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


def is_secret_key(key: str) -> bool:
    """A key of a Secret's data, as the API server validates it (IsConfigMapKey)."""
    return bool(_SECRET_KEY.fullmatch(key)) and key not in (".", "..") and not key.startswith("..")


def parse_secret_env(reader: Reader, errors: Errors, env: dict[str, str]) -> list[SecretEnv] | None:
    raw, present = reader.get("secret_env", [])
    if not present or raw is None:
        return []
    if not isinstance(raw, list):
        errors.add("secret_env", N_("must be a list of {name, secret, key}, not %(type)s", type=type_name(raw)))
        return None
    if len(raw) > MAX_SECRET_ENV:
        errors.add("secret_env", N_("at most %(max)s items, not %(count)s", max=MAX_SECRET_ENV, count=len(raw)))
        return None
    out: list[SecretEnv] = []
    seen: dict[str, int] = {}
    valid = True
    for i, item in enumerate(raw):
        where = f"secret_env[{i}]"
        sub = Reader(item, where, errors, ("name", "secret", "key"))
        if not sub.ok:
            valid = False
            continue
        name, secret, key = sub.string("name"), sub.string("secret"), sub.string("key")
        if None in (name, secret, key):
            valid = False
            continue
        problems = 0
        if problem := env_name_error(name):
            errors.add(f"{where}.name", problem)
            problems += 1
        elif name in env:
            errors.add(f"{where}.name", N_("%(name)s is also in env: a variable has one value", name=name))
            problems += 1
        elif name in seen:
            errors.add(f"{where}.name", N_("%(name)s is already secret_env[%(index)s]", name=name, index=seen[name]))
            problems += 1
        if not is_dns_subdomain(secret):
            errors.add(
                f"{where}.secret",
                N_(
                    "%(secret)r is not a Secret name: lower-case letters, digits, '-' and '.', at most 253 characters",
                    secret=secret,
                ),
            )
            problems += 1
        if not is_secret_key(key):
            errors.add(
                f"{where}.key",
                N_(
                    "%(key)r is not a key of a Secret: letters, digits, '-', '_' and '.', at most 253 characters, "
                    "not . or .. nor starting with ..",
                    key=key,
                ),
            )
            problems += 1
        if problems:
            valid = False
            continue
        seen[name] = i
        out.append(SecretEnv(name, secret, key))
    return out if valid else None
