"""Reading the rendered manifests: workloads, their pods, one object by name."""

from __future__ import annotations


def pods(objects: list[dict]) -> list[tuple[dict, dict]]:
    """(owner, pod spec) of every workload object."""
    out = []
    for obj in objects:
        if obj["kind"] in {"Deployment", "StatefulSet", "Job"}:
            out.append((obj, obj["spec"]["template"]["spec"]))
    return out


def console_pods(objects: list[dict]) -> list[tuple[dict, dict]]:
    """The console's own pods (not the dev overlay's PostgreSQL and Redis)."""
    return [(o, p) for o, p in pods(objects) if o["metadata"]["labels"].get("app.kubernetes.io/name") == "gpu-console"]


def find(objects: list[dict], kind: str, name: str) -> dict:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind} {name}: {len(matches)} rendered"
    return matches[0]


def containers(pod: dict) -> list[dict]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def settings_config_map(objects: list[dict]) -> dict:
    """The data of the console's settings ConfigMap (its name carries a hash of the content)."""
    (config,) = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("gpu-console-settings-")
    ]
    return config["data"]


def env_names(container: dict, objects: list[dict]) -> set[str]:
    """Every variable the container gets by name: its `env`, and the keys of the ConfigMaps it takes whole."""
    names = {item["name"] for item in container.get("env", [])}
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef")
        if ref:
            (config,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == ref["name"]]
            names |= set(config.get("data", {}))
    return names


def matches(selector: dict, labels: dict) -> bool:
    """A label selector's matchLabels and In / NotIn / Exists expressions against a set of labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
