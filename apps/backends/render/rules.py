"""The validation rules a JSON-schema check cannot see, re-implemented in Python.

* CEL rules (`x-kubernetes-validations`) of the Kueue (and KEDA) CRDs, each registered under the CRD's exact
  message, so tests can prove every rule is checked here or waived in `WAIVED` with a reason.
* Admission-webhook checks of Kueue (pkg/webhooks/clusterqueue_webhook.go, cohort_webhook.go) and
  Volcano (pkg/webhooks/admission/queues/validate/validate_queue.go) that our objects depend on.
* Checks over a whole rendered set: duplicates, references present and earlier in the list, and
  Volcano's hierarchy (children must fit their parent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from kubernetes.utils import parse_quantity

from apps.backends.render.names import is_qualified_name

KUEUE = "kueue.x-k8s.io"
VOLCANO = "scheduling.volcano.sh"
KEDA = "keda.sh"
TRAINER = "trainer.kubeflow.org"
TRAINJOB_MANAGERS = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
KEDA_DEFAULT_MAX_REPLICAS = 100  # the CRD's CEL rule assumes this when maxReplicaCount is unset
NATIVE_DOMAINS = ("kubernetes.io",)


@dataclass(frozen=True)
class Rule:
    group: str
    kind: str
    message: str  # for CEL rules: exactly the CRD's message
    source: str  # "CEL" or "webhook"
    check: Callable[[dict], list[str]]  # errors of one object (paths included), [] when it holds


RULES: list[Rule] = []

# CEL rules we do not evaluate, with the reason; tests fail on any CEL rule in neither list.
WAIVED: dict[tuple[str, str], str] = {
    ("LocalQueue", "field is immutable"): "transition rule (needs the stored object); a LocalQueue keeps its "
    "ClusterQueue because both names derive from the same queue",
    ("ResourceFlavor", "topologyName is immutable when topologyName is set"): "transition rule; the console sets "
    "topologyName only with topology_scheduler kueue-tas, always to the model's own Topology, and a cluster that "
    "leaves kueue-tas needs its whole-GPU flavors recreated (docs/targets.md)",
    (
        "Topology",
        "levels are mutable only when kubernetes.io/hostname is the lowest level both before and after the change",
    ): "transition rule; every Topology the console renders ends with kubernetes.io/hostname, so its "
    "levels may change with the inventory",
    ("TrainJob", "ManagedBy value is immutable"): "transition rule; the console never sets managedBy",
    ("TrainJob", "runtimeRef is immutable"): "transition rule; a submitted TrainJob is never re-applied (submit is "
    "idempotent by name)",
}


def rule(group: str, kind: str, message: str, source: str = "CEL") -> Callable:
    def register(check: Callable[[dict], list[str]]) -> Callable[[dict], list[str]]:
        RULES.append(Rule(group, kind, message, source, check))
        return check

    return register


def _group(obj: dict) -> str:
    return str(obj.get("apiVersion", "")).rpartition("/")[0]


def object_errors(obj: dict) -> list[str]:
    """Errors of every rule registered for the object's group and kind."""
    errors = []
    for r in RULES:
        if r.group == _group(obj) and r.kind == obj.get("kind"):
            errors += [f"{msg} [{r.source}: {r.message}]" for msg in r.check(obj)]
    return errors


def _quantity(value: object) -> Decimal | None:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None  # the schema's pattern reports a malformed quantity


# --- Kueue: ClusterQueue and Cohort resource groups ---------------------------------------------------


def _resources(spec: dict) -> Iterator[tuple[str, dict]]:
    """(path, resource quota) for every flavor resource in spec.resourceGroups."""
    for i, group in enumerate(spec.get("resourceGroups") or []):
        for j, flavor in enumerate(group.get("flavors") or []):
            for k, res in enumerate(flavor.get("resources") or []):
                yield f"spec.resourceGroups[{i}].flavors[{j}].resources[{k}]", res


@rule(KUEUE, "ClusterQueue", "borrowingLimit must be nil when cohort is empty")
def _cq_borrowing_needs_cohort(obj: dict) -> list[str]:
    spec = obj.get("spec") or {}
    if spec.get("cohortName"):
        return []
    return [
        f"{path}.borrowingLimit is set without spec.cohortName" for path, r in _resources(spec) if "borrowingLimit" in r
    ]


@rule(KUEUE, "ClusterQueue", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
def _cq_preemption(obj: dict) -> list[str]:
    preemption = (obj.get("spec") or {}).get("preemption")
    if preemption is None:
        return []
    reclaim = preemption.get("reclaimWithinCohort", "Never")  # CRD defaults
    borrow = preemption.get("borrowWithinCohort")
    if reclaim == "Never" and borrow is not None and borrow.get("policy", "Never") != "Never":
        return ["spec.preemption: borrowWithinCohort.policy needs reclaimWithinCohort other than Never"]
    return []


def _flavor_counts(obj: dict) -> list[str]:
    errors = []
    for i, group in enumerate((obj.get("spec") or {}).get("resourceGroups") or []):
        covered = len(group.get("coveredResources") or [])
        for j, flavor in enumerate(group.get("flavors") or []):
            if len(flavor.get("resources") or []) != covered:
                errors.append(
                    f"spec.resourceGroups[{i}].flavors[{j}]: {covered} coveredResources but "
                    f"{len(flavor.get('resources') or [])} resources"
                )
    return errors


_FLAVOR_COUNT = "flavors must have the same number of resources as the coveredResources"
rule(KUEUE, "ClusterQueue", _FLAVOR_COUNT)(_flavor_counts)
rule(KUEUE, "Cohort", _FLAVOR_COUNT)(_flavor_counts)


@rule(KUEUE, "ClusterQueue", "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor")
def _cq_fungibility(obj: dict) -> list[str]:
    fungibility = (obj.get("spec") or {}).get("flavorFungibility")
    if not fungibility or "preference" not in fungibility:
        return []
    borrow = fungibility.get("whenCanBorrow", "MayStopSearch")
    preempt = fungibility.get("whenCanPreempt", "TryNextFlavor")
    if borrow == preempt == "TryNextFlavor":
        return []
    return ["spec.flavorFungibility.preference needs whenCanBorrow and whenCanPreempt = TryNextFlavor"]


@rule(
    TRAINER,
    "TrainJob",
    "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
)
def _trainjob_managed_by(obj: dict) -> list[str]:
    spec = obj.get("spec") or {}
    if "managedBy" in spec and spec["managedBy"] not in TRAINJOB_MANAGERS:
        return [f"spec.managedBy {spec['managedBy']!r} is not one of {', '.join(TRAINJOB_MANAGERS)}"]
    return []


def _limits_need_parent(field: str, parent_field: str) -> Callable[[dict], list[str]]:
    def check(obj: dict) -> list[str]:
        spec = obj.get("spec") or {}
        if spec.get(parent_field):
            return []
        return [f"{path}.{field} is set without spec.{parent_field}" for path, r in _resources(spec) if field in r]

    return check


rule(KUEUE, "ClusterQueue", "lendingLimit must be nil when cohort is empty", "webhook")(
    _limits_need_parent("lendingLimit", "cohortName")
)
rule(KUEUE, "Cohort", "borrowingLimit must be nil when parent is empty", "webhook")(
    _limits_need_parent("borrowingLimit", "parentName")
)
rule(KUEUE, "Cohort", "lendingLimit must be nil when parent is empty", "webhook")(
    _limits_need_parent("lendingLimit", "parentName")
)


@rule(KUEUE, "ClusterQueue", "lendingLimit must be less than or equal to the nominalQuota", "webhook")
def _cq_lending_within_nominal(obj: dict) -> list[str]:
    errors = []
    for path, res in _resources(obj.get("spec") or {}):
        lend, nominal = _quantity(res.get("lendingLimit")), _quantity(res.get("nominalQuota"))
        if "lendingLimit" in res and lend is not None and nominal is not None and lend > nominal:
            errors.append(f"{path}.lendingLimit {res['lendingLimit']} is above nominalQuota {res['nominalQuota']}")
    return errors


def _resource_groups(obj: dict) -> list[str]:
    """Webhook checks shared by ClusterQueue and Cohort: names, order, duplicates, non-negative amounts."""
    errors = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for i, group in enumerate((obj.get("spec") or {}).get("resourceGroups") or []):
        covered = group.get("coveredResources") or []
        for name in covered:
            if not is_qualified_name(name):
                errors.append(f"spec.resourceGroups[{i}].coveredResources: {name!r} is not a qualified name")
            if name in seen_resources:
                errors.append(f"spec.resourceGroups[{i}].coveredResources: {name!r} is covered twice")
            seen_resources.add(name)
        for j, flavor in enumerate(group.get("flavors") or []):
            if flavor.get("name") in seen_flavors:
                errors.append(f"spec.resourceGroups[{i}].flavors[{j}]: flavor {flavor.get('name')!r} appears twice")
            seen_flavors.add(flavor.get("name"))
            for k, res in enumerate(flavor.get("resources") or []):
                path = f"spec.resourceGroups[{i}].flavors[{j}].resources[{k}]"
                if k < len(covered) and res.get("name") != covered[k]:
                    errors.append(f"{path}.name {res.get('name')!r} must match coveredResources[{k}] {covered[k]!r}")
                for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    amount = _quantity(res.get(field)) if field in res else None
                    if amount is not None and amount < 0:
                        errors.append(f"{path}.{field} must be greater than or equal to 0")
    return errors


rule(KUEUE, "ClusterQueue", "resource groups: names, order, duplicates, non-negative quotas", "webhook")(
    _resource_groups
)
rule(KUEUE, "Cohort", "resource groups: names, order, duplicates, non-negative quotas", "webhook")(_resource_groups)


# --- Kueue: ResourceFlavor ----------------------------------------------------------------------------

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@rule(KUEUE, "ResourceFlavor", "at least one nodeLabel is required when topology is set")
def _rf_topology_needs_labels(obj: dict) -> list[str]:
    spec = obj.get("spec") or {}
    if "topologyName" in spec and not spec.get("nodeLabels"):
        return ["spec.topologyName is set without spec.nodeLabels"]
    return []


# --- Kueue: Topology -----------------------------------------------------------------------------------


def _levels(obj: dict) -> list[str]:
    return [level.get("nodeLabel") for level in (obj.get("spec") or {}).get("levels") or []]


@rule(KUEUE, "Topology", "must be unique")
def _topology_unique(obj: dict) -> list[str]:
    levels = _levels(obj)
    return [f"spec.levels: {label!r} appears twice" for label in sorted({x for x in levels if levels.count(x) > 1})]


@rule(KUEUE, "Topology", "the kubernetes.io/hostname label can only be used at the lowest level of topology")
def _topology_hostname_lowest(obj: dict) -> list[str]:
    levels = _levels(obj)
    if "kubernetes.io/hostname" in levels and levels[-1] != "kubernetes.io/hostname":
        return ["spec.levels: kubernetes.io/hostname is not the last level"]
    return []


def _each(field: str, message: str, bad: Callable[[dict], bool]) -> Callable[[dict], list[str]]:
    def check(obj: dict) -> list[str]:
        items = (obj.get("spec") or {}).get(field) or []
        return [f"spec.{field}[{i}]: {message}" for i, item in enumerate(items) if bad(item)]

    return check


for _field, _message, _bad in [
    (
        "nodeTaints",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        lambda t: t.get("effect") not in _EFFECTS,
    ),
    (
        "tolerations",
        "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
        lambda t: "key" not in t and t.get("operator") != "Exists",
    ),
    (
        "tolerations",
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        lambda t: "tolerationSeconds" in t and t.get("effect") != "NoExecute",
    ),
    (
        "tolerations",
        "supported toleration values: 'Equal'(default), 'Exists'",
        lambda t: "operator" in t and t["operator"] not in ("Equal", "Exists"),
    ),
    (
        "tolerations",
        "a value must be empty when 'operator' is 'Exists'",
        lambda t: t.get("operator") == "Exists" and "value" in t,
    ),
    (
        "tolerations",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        lambda t: "effect" in t and t["effect"] not in _EFFECTS,
    ),
]:
    rule(KUEUE, "ResourceFlavor", _message)(_each(_field, _message, _bad))


# --- Volcano: Queue ----------------------------------------------------------------------------------


def _amounts(values: dict | None) -> dict[str, Decimal]:
    out = {}
    for name, value in (values or {}).items():
        amount = _quantity(value)
        if amount is not None:
            out[name] = amount
    return out


def less_partly(left: dict[str, Decimal], right: dict[str, Decimal]) -> bool:
    """Volcano's Resource.LessPartly with Zero defaults: some dimension of `left` is below `right`'s."""
    return any(left.get(name, Decimal(0)) < right.get(name, Decimal(0)) for name in left.keys() | right.keys())


@rule(VOLCANO, "Queue", "capability >= deserved >= guarantee, non-negative", "webhook")
def _queue_resources(obj: dict) -> list[str]:
    spec = obj.get("spec") or {}
    errors = []
    raw = {
        "capability": spec.get("capability"),
        "deserved": spec.get("deserved"),
        "guarantee.resource": (spec.get("guarantee") or {}).get("resource"),
    }
    for field, values in raw.items():
        for name, amount in _amounts(values).items():
            if amount < 0:
                errors.append(f"spec.{field}.{name} must be greater than or equal to 0")
    capability, deserved, guarantee = (_amounts(v) for v in raw.values())
    if spec.get("capability") and less_partly(capability, deserved):
        errors.append("spec.deserved: deserved should less equal than capability")
    if spec.get("capability") and less_partly(capability, guarantee):
        errors.append("spec.guarantee: guarantee should less equal than capability")
    if raw["guarantee.resource"] and less_partly(deserved, guarantee):
        errors.append("spec.guarantee: guarantee should less equal than deserved")
    return errors


# --- KEDA: ScaledObject (rendered for autoscaled inference services) -----------------------------------------


@rule(KEDA, "ScaledObject", "minReplicaCount must be less than or equal to maxReplicaCount")
def _scaled_object_min_max(obj: dict) -> list[str]:
    spec = obj.get("spec") or {}
    low = spec.get("minReplicaCount")
    high = spec.get("maxReplicaCount", KEDA_DEFAULT_MAX_REPLICAS)
    if isinstance(low, int) and isinstance(high, int) and low > high:
        return [f"spec.minReplicaCount {low} is above maxReplicaCount {high}"]
    return []


# --- Built-ins ------------------------------------------------------------------------------------------


@rule("", "ResourceQuota", "extended resources only with the requests. prefix; valid quantities", "apiserver")
def _resource_quota(obj: dict) -> list[str]:
    errors = []
    for key, value in ((obj.get("spec") or {}).get("hard") or {}).items():
        if _quantity(value) is None:
            errors.append(f"spec.hard.{key}: {value!r} is not a quantity")
        resource = key.removeprefix("requests.").removeprefix("limits.")
        domain = resource.partition("/")[0] if "/" in resource else ""
        extended = bool(domain) and not any(domain == d or domain.endswith("." + d) for d in NATIVE_DOMAINS)
        if extended and not key.startswith("requests."):
            errors.append(f"spec.hard.{key}: an extended resource is quota'd only as requests.{resource}")
    return errors


# --- Whole sets -------------------------------------------------------------------------------------------


def _key(obj: dict) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (_group(obj), obj.get("kind", ""), meta.get("namespace", ""), meta.get("name", ""))


def _references(obj: dict) -> list[tuple[tuple[str, str, str, str], str]]:
    """(key of the referenced object, what refers to it) for the references our objects make."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    group, kind = _group(obj), obj.get("kind")
    refs = []
    if meta.get("namespace"):
        refs.append((("", "Namespace", "", meta["namespace"]), "metadata.namespace"))
    if group == KUEUE and kind == "LocalQueue":
        refs.append(((KUEUE, "ClusterQueue", "", spec.get("clusterQueue", "")), "spec.clusterQueue"))
    if group == KUEUE and kind == "ClusterQueue":
        if spec.get("cohortName"):
            refs.append(((KUEUE, "Cohort", "", spec["cohortName"]), "spec.cohortName"))
        for group_spec in spec.get("resourceGroups") or []:
            for flavor in group_spec.get("flavors") or []:
                refs.append(((KUEUE, "ResourceFlavor", "", flavor.get("name", "")), "a resourceGroups flavor"))
    if group == KUEUE and kind == "ResourceFlavor" and spec.get("topologyName"):
        # Kueue holds a ClusterQueue with such a flavor inactive until the Topology exists (TopologyNotFound).
        refs.append(((KUEUE, "Topology", "", spec["topologyName"]), "spec.topologyName"))
    if group == KUEUE and kind == "Cohort" and spec.get("parentName"):
        refs.append(((KUEUE, "Cohort", "", spec["parentName"]), "spec.parentName"))
    if group == VOLCANO and kind == "Queue" and spec.get("parent") not in (None, "", "root"):
        refs.append(((VOLCANO, "Queue", "", spec["parent"]), "spec.parent"))
    return refs


def set_errors(objects: list[dict]) -> list[str]:
    """Duplicates, references missing or later in the list, and Volcano's parent/child limits."""
    errors = []
    position: dict[tuple[str, str, str, str], int] = {}
    for i, obj in enumerate(objects):
        key = _key(obj)
        if key in position:
            errors.append(f"{key[1]} {key[3]}: appears twice")
        position.setdefault(key, i)
    for i, obj in enumerate(objects):
        for ref, via in _references(obj):
            where = position.get(ref)
            if where is None:
                errors.append(f"{obj.get('kind')} {_key(obj)[3]}: {via} refers to {ref[1]} {ref[3]!r}, not in the set")
            elif where > i:
                errors.append(
                    f"{obj.get('kind')} {_key(obj)[3]}: {via} refers to {ref[1]} {ref[3]!r}, which comes later"
                )
    return errors + _volcano_hierarchy(objects)


def _volcano_hierarchy(objects: list[dict]) -> list[str]:
    """The webhook's hierarchy checks: child capability within the parent's; children's sums within it."""
    queues = {
        o["metadata"]["name"]: o.get("spec") or {} for o in objects if _group(o) == VOLCANO and o.get("kind") == "Queue"
    }
    errors = []
    for parent_name, parent in queues.items():
        children = [(n, s) for n, s in queues.items() if s.get("parent") == parent_name]
        if not children:
            continue
        parent_cap = _amounts(parent.get("capability"))
        for name, child in children:
            if less_partly(parent_cap, _amounts(child.get("capability"))):
                errors.append(f"Queue {parent_name}: capability is less than child queue {name}'s")
        for field, parent_limit in (
            ("guarantee", (parent.get("guarantee") or {}).get("resource")),
            ("deserved", parent.get("deserved")),
        ):
            total: dict[str, Decimal] = {}
            for _, child in children:
                values = (child.get("guarantee") or {}).get("resource") if field == "guarantee" else child.get(field)
                for res, amount in _amounts(values).items():
                    total[res] = total.get(res, Decimal(0)) + amount
            limit = parent_limit or parent.get("capability")
            if limit and less_partly(_amounts(limit), total):
                errors.append(f"Queue {parent_name}: sum of children's {field} exceeds the parent's")
    return errors
