"""Name rules shared by the renderers: DNS-1123 names, label keys and values, deterministic shortening.

Names the console already validated (tenant slugs, queue names, namespaces) are used as they are and
only checked here; a name the renderer derives (a ClusterQueue named "<tenant>-<queue>") may exceed 63
characters and is then shortened deterministically, with a hash of the full name so that two long
names sharing a prefix stay distinct.
"""

from __future__ import annotations

import hashlib
import posixpath
import re

from apps.backends.render.errors import RenderError
from apps.core.text import N_, Text

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Patterns are used with fullmatch: with match, "$" would also accept a trailing newline.
# Label values and the name part of qualified names (label keys, resource names): 63 characters,
# alphanumerics at both ends, '-', '_' and '.' inside.
_QUALIFIED_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_HASH_LEN = 8
_PATH_PART = re.compile(r"[A-Za-z0-9._@+=,-]+")
# Image references, after github.com/distribution/reference (regexp.go).
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_DOMAIN = re.compile(
    r"(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*"
    r"|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
)
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)  # Go's \w is ASCII-only
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
IMAGE_NAME_MAX = 255


def is_dns_label(name: str) -> bool:
    """RFC 1123 label: what Kubernetes requires of namespace names (and what we use for every name)."""
    return len(name) <= DNS_LABEL_MAX and bool(_DNS_LABEL.fullmatch(name))


def is_dns_subdomain(name: str) -> bool:
    """RFC 1123 subdomain: what Kubernetes requires of most object names."""
    return len(name) <= DNS_SUBDOMAIN_MAX and bool(_DNS_SUBDOMAIN.fullmatch(name))


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= DNS_LABEL_MAX and bool(_QUALIFIED_PART.fullmatch(value)))


def is_qualified_name(key: str) -> bool:
    """A label key or resource name: optional DNS-subdomain prefix and '/', then a 63-character name."""
    prefix, _, name = key.rpartition("/")
    if prefix and not is_dns_subdomain(prefix):
        return False
    return len(name) <= DNS_LABEL_MAX and bool(_QUALIFIED_PART.fullmatch(name))


def dns_label(name: str) -> str:
    """`name` if it is a valid DNS-1123 label, else a deterministic valid label derived from it.

    Invalid characters become '-', the result is cut to leave room for '-' and 8 hex digits of the
    SHA-256 of the original name. The hash keeps distinct inputs distinct; the readable prefix keeps
    the object recognisable in `kubectl get`.
    """
    if is_dns_label(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_LEN]
    cleaned = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip("-")
    prefix = cleaned[: DNS_LABEL_MAX - _HASH_LEN - 1].rstrip("-")
    return f"{prefix}-{digest}" if prefix else digest


def require_dns_label(name: str, what: str) -> str:
    """Return `name` or raise RenderError: used for names the console chose and must not be altered."""
    if not is_dns_label(name):
        raise RenderError(
            what,
            f"{name!r} is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {DNS_LABEL_MAX} characters)",
        )
    return name


def require_label_value(value: str, what: str) -> str:
    if not is_label_value(value):
        raise RenderError(
            what,
            f"{value!r} is not a valid label value (at most {DNS_LABEL_MAX} characters: letters, digits, "
            "'-', '_' and '.', starting and ending with a letter or digit)",
        )
    return value


def path_error(value: str) -> Text | None:
    """Why `value` is not a clean absolute path (no '..', no '//', no shell or control characters), or None."""
    if not value.startswith("/"):
        return N_("%(path)r must be an absolute path", path=value)
    if value != "/" and (posixpath.normpath(value) != value or "//" in value):  # normpath keeps a leading //
        return N_("%(path)r is not normalised (no '.', '..', '//' or trailing '/')", path=value)
    parts = [p for p in value.split("/") if p]
    if any(p in (".", "..") for p in parts) or not all(_PATH_PART.fullmatch(p) for p in parts):
        return N_("%(path)r may contain only letters, digits and . _ @ + = , - between '/'", path=value)
    if len(value) > 1024:
        return N_("a path of at most 1024 characters")
    return None


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
    if len(name) > IMAGE_NAME_MAX:
        return N_("the repository name is longer than %(max)s characters", max=IMAGE_NAME_MAX)
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
