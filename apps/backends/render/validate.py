"""Strict validation of rendered Kubernetes objects, for tests and as a pre-flight check before apply.

Three layers, all offline:

1. Schema. Built-in kinds with `kubernetes-validate` in strict mode (unknown fields are errors), once
   per supported Kubernetes version, refusing a silent fallback to another version's schema. Custom
   objects against the `openAPIV3Schema` of the matching CRD version in `crds/`, closed the way a
   server with fieldValidation=Strict treats them (see `close_schema`).
2. Rules a schema cannot carry: the CEL rules (`x-kubernetes-validations`) and the admission-webhook
   checks of Kueue and Volcano that our objects depend on, re-implemented in `rules.py` and named by
   the CRD's own message so a test can prove that every CEL rule is either checked or knowingly waived.
3. Metadata and the whole set: names, label keys and values, namespace vs cluster scope, quantities,
   duplicates, and references (a LocalQueue's ClusterQueue, a Queue's parent, a namespaced object's
   Namespace) that must appear before the object that refers to them.

`validate_objects` returns messages; `check_objects` raises ManifestError with all of them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, VersionNotSupportedError

from apps.backends.render import rules
from apps.backends.render.names import is_dns_label, is_dns_subdomain, is_label_value, is_qualified_name

K8S_VERSIONS = ("1.31", "1.32", "1.33", "1.34", "1.35")
CRD_DIR = Path(__file__).resolve().parent / "crds"
# libyaml's safe loader reads the 1.3 MB LeaderWorkerSet CRD in a fraction of the pure-Python time.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Scope of the built-in kinds the renderers produce (kubernetes-validate does not know scope).
BUILTIN_SCOPE = {"Namespace": "Cluster", "PriorityClass": "Cluster", "ResourceQuota": "Namespaced"}


class ManifestError(ValueError):
    """Rendered objects that a strict API server (or its admission webhooks) would refuse."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


@dataclass(frozen=True)
class CrdVersion:
    """One served version of a vendored CRD."""

    group: str
    version: str
    kind: str
    scope: str  # "Namespaced" | "Cluster"
    schema: dict  # the openAPIV3Schema as vendored
    file: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


@lru_cache(maxsize=1)
def crd_index() -> dict[tuple[str, str], CrdVersion]:
    """(apiVersion, kind) -> CRD version, for every served version of every CRD in crds/."""
    index: dict[tuple[str, str], CrdVersion] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=_YAML_LOADER)  # noqa: S506 - a safe loader, C when available
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served", False):
                continue
            entry = CrdVersion(
                group=spec["group"],
                version=version["name"],
                kind=spec["names"]["kind"],
                scope=spec["scope"],
                schema=version["schema"]["openAPIV3Schema"],
                file=path.name,
            )
            index[(entry.api_version, entry.kind)] = entry
    return index


def close_schema(schema: dict) -> dict:
    """A copy of a structural schema where unknown fields are errors, as with fieldValidation=Strict.

    Every object schema with `properties` and neither `additionalProperties` nor
    `x-kubernetes-preserve-unknown-fields` gets `additionalProperties: false`; `nullable: true` becomes
    a type that also admits null; an embedded resource keeps apiVersion, kind and metadata.
    """
    out = copy.deepcopy(schema)
    _close(out)
    return out


def _close(node: object) -> None:
    if isinstance(node, list):
        for item in node:
            _close(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("nullable") is True and isinstance(node.get("type"), str):
        node["type"] = [node["type"], "null"]
    if node.get("x-kubernetes-embedded-resource"):
        props = node.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props.setdefault("metadata", {"type": "object"})
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        node["additionalProperties"] = False
    for key, value in node.items():
        if key == "properties":
            for child in value.values():
                _close(child)
        elif key in ("items", "additionalProperties", "anyOf", "allOf", "oneOf", "not"):
            _close(value)


_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@lru_cache(maxsize=64)
def _crd_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    entry = crd_index()[(api_version, kind)]
    return jsonschema.Draft4Validator(close_schema(entry.schema), format_checker=_FORMATS)


def is_custom(obj: dict) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in crd_index()


def validate_builtin(obj: dict, versions: Iterable[str] = K8S_VERSIONS) -> list[str]:
    """Strict schema errors of a built-in object, per Kubernetes version."""
    errors = []
    for version in versions:
        try:
            used = kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path) or "<root>"
            errors.append(f"{_name(obj)}: Kubernetes {version}: {path}: {exc.message}")
            continue
        except (SchemaNotFoundError, VersionNotSupportedError) as exc:
            errors.append(f"{_name(obj)}: Kubernetes {version}: {exc.message}")
            continue
        if used != version:  # the package falls back to an older schema when it lacks one
            errors.append(f"{_name(obj)}: Kubernetes {version}: validated against schema {used} instead")
    return errors


def validate_custom(obj: dict) -> list[str]:
    """Errors of a custom object against its CRD (closed schema), then the CEL/webhook rules we implement."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in crd_index():
        return [f"{_name(obj)}: no vendored CRD serves {key[1]} in {key[0]}"]
    validator = _crd_validator(*key)
    errors = [
        f"{_name(obj)}: {'.'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
        for err in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    ]
    errors += [f"{_name(obj)}: {msg}" for msg in rules.object_errors(obj)]
    return errors


def metadata_errors(obj: dict) -> list[str]:
    """Name, scope and label checks that the schemas leave out."""
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    kind = obj.get("kind", "")
    errors = []
    valid_name = is_dns_label(name) if kind == "Namespace" else is_dns_subdomain(name)
    if not valid_name:
        errors.append(f"{_name(obj)}: metadata.name {name!r} is not a valid {kind} name")
    scope = crd_index()[(obj["apiVersion"], kind)].scope if is_custom(obj) else BUILTIN_SCOPE.get(kind)
    if scope == "Namespaced" and not meta.get("namespace"):
        errors.append(f"{_name(obj)}: a namespaced {kind} needs metadata.namespace")
    if scope == "Cluster" and "namespace" in meta:
        errors.append(f"{_name(obj)}: a cluster-scoped {kind} must not set metadata.namespace")
    if "namespace" in meta and not is_dns_label(meta["namespace"]):
        errors.append(f"{_name(obj)}: metadata.namespace {meta['namespace']!r} is not a DNS-1123 label")
    for key, value in (meta.get("labels") or {}).items():
        if not is_qualified_name(key):
            errors.append(f"{_name(obj)}: label key {key!r} is not a qualified name")
        if not isinstance(value, str) or not is_label_value(value):
            errors.append(f"{_name(obj)}: label {key}={value!r} is not a valid label value")
    return errors


def validate_object(obj: dict, versions: Iterable[str] = K8S_VERSIONS) -> list[str]:
    """Every error of one object: schema (built-in per version, or CRD), rules, metadata."""
    errors = validate_custom(obj) if is_custom(obj) else validate_builtin(obj, versions)
    if not is_custom(obj):
        errors += [f"{_name(obj)}: {msg}" for msg in rules.object_errors(obj)]
    return errors + metadata_errors(obj)


def validate_objects(objects: list[dict], versions: Iterable[str] = K8S_VERSIONS) -> list[str]:
    """Every error of a rendered set, including duplicates, dangling references and wrong order."""
    versions = tuple(versions)
    errors: list[str] = []
    for obj in objects:
        errors += validate_object(obj, versions)
    errors += rules.set_errors(objects)
    return errors


def check_objects(objects: list[dict], versions: Iterable[str] = K8S_VERSIONS) -> None:
    """Raise ManifestError unless every object would be accepted; call before applying."""
    errors = validate_objects(objects, versions)
    if errors:
        raise ManifestError(errors)


def _name(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '?')} {ns}{meta.get('name', '?')}"
