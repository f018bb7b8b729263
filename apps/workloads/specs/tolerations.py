"""`tolerations`: taints a workload tolerates besides its node pool's, as Kubernetes takes them.

Each item is {key, operator, value, effect} with Kubernetes's rules
(https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/): `operator` Equal (the default)
matches the key and value, Exists any value of the key (and then has no value); an empty `effect` matches every
effect; the key is a label key and the value a label value. The console refuses what would let work past a
node's own state: an empty key with Exists (every taint), and the taints that mark a node cordoned, not ready,
under pressure, about to be removed or awaiting a reset or RMA (`apps.fleet.inventory.is_node_state_taint`).
`tolerationSeconds` is not offered: it only bounds how long a NoExecute taint may be tolerated.
"""

from __future__ import annotations

from apps.backends.render.names import is_label_value, is_qualified_name
from apps.backends.render.spec import Toleration
from apps.core.text import N_
from apps.fleet.inventory import is_node_state_taint
from apps.workloads.specs.reader import Errors, Reader, type_name

OPERATORS = ("Equal", "Exists")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_TOLERATIONS = 16


def parse_tolerations(reader: Reader, errors: Errors) -> list[Toleration] | None:
    raw, present = reader.get("tolerations", [])
    if not present or raw is None:
        return []
    if not isinstance(raw, list):
        errors.add(
            "tolerations",
            N_("must be a list of {key, operator, value, effect}, not %(type)s", type=type_name(raw)),
        )
        return None
    if len(raw) > MAX_TOLERATIONS:
        errors.add("tolerations", N_("at most %(max)s items, not %(count)s", max=MAX_TOLERATIONS, count=len(raw)))
        return None
    out: list[Toleration] = []
    valid = True
    for i, item in enumerate(raw):  # every item is read, so all their errors are reported at once
        toleration = _parse_one(Reader(item, f"tolerations[{i}]", errors, ("key", "operator", "value", "effect")))
        if toleration is None:
            valid = False
        elif toleration not in out:
            out.append(toleration)
    return out if valid else None


def _parse_one(sub: Reader) -> Toleration | None:
    if not sub.ok:
        return None
    where, errors = sub.prefix, sub.errors
    key = sub.string("key")
    operator = sub.string("operator", "Equal")
    value = sub.string("value", "")
    effect = sub.string("effect", "")
    if None in (key, operator, value, effect):
        return None
    ok = True
    if operator not in OPERATORS:
        errors.add(
            f"{where}.operator", N_("%(value)r is not one of %(allowed)s", value=operator, allowed=", ".join(OPERATORS))
        )
        ok = False
    if effect and effect not in EFFECTS:
        errors.add(
            f"{where}.effect", N_("%(value)r is not one of %(allowed)s", value=effect, allowed=", ".join(EFFECTS))
        )
        ok = False
    if not is_qualified_name(key):
        errors.add(
            f"{where}.key",
            N_(
                "%(key)r is not a taint key: [prefix/]name, the name at most 63 letters, digits, '-', '_' and '.'; "
                "a toleration of every taint is not allowed",
                key=key,
            ),
        )
        ok = False
    elif is_node_state_taint(key):
        errors.add(
            f"{where}.key",
            N_(
                "%(key)r marks a node's own state (cordoned, not ready, being removed, awaiting repair): work is "
                "never placed past it",
                key=key,
            ),
        )
        ok = False
    if operator == "Exists" and value:
        errors.add(f"{where}.value", N_("must be empty with operator Exists (it matches every value of the key)"))
        ok = False
    elif not is_label_value(value):
        errors.add(
            f"{where}.value",
            N_("%(value)r is not a taint value (at most 63 letters, digits, '-', '_' and '.')", value=value),
        )
        ok = False
    return Toleration(key, operator, value, effect) if ok else None
