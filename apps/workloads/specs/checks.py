"""Value checks shared by the training and inference parsers: names, image references, paths, env, MIG."""

from __future__ import annotations

import re

from apps.backends.render.names import path_error
from apps.core.text import N_, Text
from apps.workloads.specs.model import (
    MAX_ENV,
    MAX_ENV_VALUE,
    MIG_COMPUTE_SLICES,
    MIG_MEMORY_SLICES,
    NAME_MAX,
    RESERVED_ENV,
    RESERVED_ENV_PREFIXES,
    RESERVED_MOUNTS,
)
from apps.workloads.specs.reader import Errors, Reader, is_text, type_name

# Patterns are used with fullmatch: "$" alone would let a trailing newline through.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HF_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
URL = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?")
# Image references, after github.com/distribution/reference (regexp.go).
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_DOMAIN = re.compile(
    r"(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*"
    r"|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
)
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)  # Go's \w is ASCII-only
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
_IMAGE_NAME_MAX = 255


def is_dns_label(value: str) -> bool:
    return len(value) <= NAME_MAX and bool(_DNS_LABEL.fullmatch(value))


def check_dns_label(errors: Errors, path: str, value: str | None, what: Text | None = None) -> None:
    """`what` names the value in the message ("tenant slug"), marked with N_; "name" by default."""
    if value is not None and not is_dns_label(value):
        errors.add(
            path,
            N_(
                "%(value)r is not a valid %(what)s: use 1 to %(max)s lower-case letters, digits and '-', starting "
                "and ending with a letter or digit (a DNS-1123 label)",
                value=value,
                what=what if what is not None else N_("name"),
                max=NAME_MAX,
            ),
        )


def image_error(image: str) -> Text | None:
    """Why `image` is not a pinned container image reference ([registry[:port]/]repo[:tag][@digest]), or None."""
    if not image:
        return N_("an image reference is required, e.g. nvcr.io/nvidia/pytorch:24.08-py3")
    if any(c.isspace() for c in image) or any(c in image for c in "$`;|&<>()'\"\\*?!{}"):
        return N_("%(image)r contains spaces or shell characters; an image reference has neither", image=image)
    name, at, digest = image.partition("@")
    if at and not _DIGEST.fullmatch(digest):
        return N_("%(digest)r is not a digest (e.g. sha256: followed by 64 hex digits)", digest=digest)
    if at and digest.startswith("sha256:") and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        return N_("a sha256 digest is 64 lower-case hex digits")
    tag = ""
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG.fullmatch(tag):
            return N_(
                "%(tag)r is not a valid tag (letters, digits, '_', '.', '-'; at most 128, not starting with . or -)",
                tag=tag,
            )
    if len(name) > _IMAGE_NAME_MAX:
        return N_("the repository name is longer than %(max)s characters", max=_IMAGE_NAME_MAX)
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        if not _DOMAIN.fullmatch(first):
            return N_("%(host)r is not a valid registry host[:port]", host=first)
        path = rest
    else:
        path = name
    if not path:
        return N_("the repository path is missing")
    for component in path.split("/"):
        if component != component.lower():
            return N_("the repository path %(path)r must be lower-case", path=path)
        if not _PATH_COMPONENT.fullmatch(component):
            return N_(
                "%(component)r is not a valid repository path component (lower-case letters and digits, "
                "separated by '.', '_', '__' or '-')",
                component=component,
            )
    if not tag and not at:
        return N_(
            "%(image)r has no tag or digest; pin one (e.g. :24.08-py3) so a restart runs the same image", image=image
        )
    return None


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def env_name_error(name: object) -> Text | None:
    """Why `name` cannot be an environment variable of a workload (not a name, or one the console sets)."""
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name) or len(name) > 128:
        return N_("%(name)r is not a variable name: letters, digits and '_', not starting with a digit", name=name)
    if name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES):
        reserved = ", ".join(RESERVED_ENV_PREFIXES)
        return N_("%(name)s is set by the console (names %(reserved)s* are reserved)", name=name, reserved=reserved)
    return None


def check_env(errors: Errors, reader: Reader) -> dict[str, str]:
    value, present = reader.get("env", {})
    if not present:
        return {}
    if not isinstance(value, dict):
        errors.add(
            reader.path("env"), N_("must be an object of NAME: value strings, not %(type)s", type=type_name(value))
        )
        return {}
    if len(value) > MAX_ENV:
        errors.add(reader.path("env"), N_("at most %(max)s variables, not %(count)s", max=MAX_ENV, count=len(value)))
    out = {}
    for name, item in value.items():
        where = f"{reader.path('env')}.{name}"
        if problem := env_name_error(name):
            errors.add(where, problem)
        elif not isinstance(item, str):
            errors.add(where, N_("must be a string, not %(type)s", type=type_name(item)))
        elif "\x00" in item or len(item) > MAX_ENV_VALUE or not is_text(item):
            errors.add(where, N_("at most %(max)s characters of text, without NUL", max=MAX_ENV_VALUE))
        else:
            out[name] = item
    return out


def check_volume(errors: Errors, where: str, claim: str | None, mount_path: str | None) -> None:
    check_dns_label(errors, f"{where}.claim", claim, N_("PersistentVolumeClaim name"))
    if mount_path is None:
        return
    problem = path_error(mount_path)
    if problem:
        errors.add(f"{where}.mount_path", problem)
    elif mount_path == "/" or any(under(mount_path, r) for r in RESERVED_MOUNTS):
        errors.add(
            f"{where}.mount_path",
            N_(
                "%(path)r would hide part of the container; reserved: /, %(reserved)s",
                path=mount_path,
                reserved=", ".join(RESERVED_MOUNTS),
            ),
        )


def mig_profiles(entry: dict) -> dict[str, tuple[int, int]]:
    """profile -> (compute slices, memory GB) from a catalog entry (lists from JSON or tuples)."""
    return {str(p[0]): (int(p[1]), int(p[2])) for p in entry.get("mig_profiles") or []}


def mig_per_gpu(profile: tuple[int, int], memory_gb: int) -> int:
    """How many instances of a MIG profile one GPU holds: limited by 7 compute and 8 memory slices."""
    slices, gb = profile
    memory_slices = max(1, round(gb / (memory_gb / MIG_MEMORY_SLICES))) if memory_gb else 1
    return max(1, min(MIG_COMPUTE_SLICES // slices, MIG_MEMORY_SLICES // memory_slices))


def check_model(errors: Errors, model: str) -> None:
    """A Hugging Face id ("org/name" or "name") or an absolute path (weights on a volume)."""
    if model.startswith("/"):
        if problem := path_error(model):
            errors.add("model", problem)
        return
    parts = model.split("/")
    if len(parts) > 2 or not all(_HF_PART.fullmatch(p) for p in parts) or ".." in model:
        errors.add(
            "model",
            N_(
                "%(model)r is neither a Hugging Face model id (org/name: letters, digits, '.', '_', '-') nor an "
                "absolute path",
                model=model,
            ),
        )
