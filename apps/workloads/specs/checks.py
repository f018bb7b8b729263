"""Value checks of the spec fields: names, image references, paths, env, model ids, MIG. Each says why a value
is refused (an apps.core.text Text) or returns None; `apps.workloads.specs.fields.Check` attaches them to fields."""

from __future__ import annotations

import re

# image_error is a spec check too (the image fields'); the pool pre-pull list uses it from names.py.
from apps.backends.render.names import image_error, is_dns_subdomain, path_error  # noqa: F401
from apps.core.text import N_, Text
from apps.workloads.specs.model import (
    MAX_ENV_VALUE,
    MIG_COMPUTE_SLICES,
    MIG_MEMORY_SLICES,
    NAME_MAX,
    RESERVED_ENV,
    RESERVED_ENV_PREFIXES,
    RESERVED_MOUNTS,
)

# Patterns are used with fullmatch: "$" alone would let a trailing newline through.
DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_HF_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
URL = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


def is_dns_label(value: str) -> bool:
    return len(value) <= NAME_MAX and bool(re.fullmatch(DNS_LABEL, value))


def dns_label_error(what: Text):
    """A check that `value` is a DNS-1123 label; `what` names it in the message ("tenant slug"), marked with N_."""

    def check(value: str) -> Text | None:
        if is_dns_label(value):
            return None
        return N_(
            "%(value)r is not a valid %(what)s: use 1 to %(max)s lower-case letters, digits and '-', starting "
            "and ending with a letter or digit (a DNS-1123 label)",
            value=value,
            what=what,
            max=NAME_MAX,
        )

    return check


def is_text(value: str) -> bool:
    """False for strings JSON can carry but UTF-8 cannot (lone surrogates such as "\\ud800")."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def argument_error(value: str) -> Text | None:
    """One command-line argument (command, args, extra_args): passed as it is, so text without NUL."""
    if "\x00" in value:
        return N_("a NUL character cannot be passed in an argument")
    if not is_text(value):
        return N_("is not valid Unicode text (a lone surrogate)")
    return None


def program_error(command: list[str]) -> Text | None:
    if command and (not command[0] or command[0].startswith("-")):
        return N_("the program name cannot be empty or start with '-'")
    return None


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def env_name_error(name: str) -> Text | None:
    """Why `name` cannot be an environment variable of a workload (not a name, or one the console sets)."""
    if not re.fullmatch(ENV_NAME, name) or len(name) > 128:
        return N_("%(name)r is not a variable name: letters, digits and '_', not starting with a digit", name=name)
    if name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES):
        reserved = ", ".join(RESERVED_ENV_PREFIXES)
        return N_("%(name)s is set by the console (names %(reserved)s* are reserved)", name=name, reserved=reserved)
    return None


def env_value_error(value: str) -> Text | None:
    if "\x00" in value or len(value) > MAX_ENV_VALUE or not is_text(value):
        return N_("at most %(max)s characters of text, without NUL", max=MAX_ENV_VALUE)
    return None


def mount_error(mount_path: str) -> Text | None:
    """A volume's mount path: a clean absolute path that hides nothing the container needs."""
    if problem := path_error(mount_path):
        return problem
    if mount_path == "/" or any(under(mount_path, r) for r in RESERVED_MOUNTS):
        return N_(
            "%(path)r would hide part of the container; reserved: /, %(reserved)s",
            path=mount_path,
            reserved=", ".join(RESERVED_MOUNTS),
        )
    return None


def model_error(model: str) -> Text | None:
    """A Hugging Face id ("org/name" or "name") or an absolute path (weights on a volume)."""
    if model.startswith("/"):
        return path_error(model)
    parts = model.split("/")
    if len(parts) > 2 or not all(_HF_PART.fullmatch(p) for p in parts) or ".." in model:
        return N_(
            "%(model)r is neither a Hugging Face model id (org/name: letters, digits, '.', '_', '-') nor an "
            "absolute path",
            model=model,
        )
    return None


def url_error(address: str) -> Text | None:
    if not URL.fullmatch(address):
        return N_("%(address)r is not an http(s)://host[:port][/path] URL", address=address)
    return None


def secret_name_error(secret: str) -> Text | None:
    if is_dns_subdomain(secret):
        return None
    return N_(
        "%(secret)r is not a Secret name: lower-case letters, digits, '-' and '.', at most 253 characters",
        secret=secret,
    )


def secret_key_error(key: str) -> Text | None:
    """A key of a Secret's data, as the API server validates it (IsConfigMapKey)."""
    if _SECRET_KEY.fullmatch(key) and key not in (".", "..") and not key.startswith(".."):
        return None
    return N_(
        "%(key)r is not a key of a Secret: letters, digits, '-', '_' and '.', at most 253 characters, "
        "not . or .. nor starting with ..",
        key=key,
    )


def mig_profiles(entry: dict) -> dict[str, tuple[int, int]]:
    """profile -> (compute slices, memory GB) from a catalog entry (lists from JSON or tuples)."""
    return {str(p[0]): (int(p[1]), int(p[2])) for p in entry.get("mig_profiles") or []}


def mig_per_gpu(profile: tuple[int, int], memory_gb: int) -> int:
    """How many instances of a MIG profile one GPU holds: limited by 7 compute and 8 memory slices."""
    slices, gb = profile
    memory_slices = max(1, round(gb / (memory_gb / MIG_MEMORY_SLICES))) if memory_gb else 1
    return max(1, min(MIG_COMPUTE_SLICES // slices, MIG_MEMORY_SLICES // memory_slices))
