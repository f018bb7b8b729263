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

from typing import Annotated, Literal

from pydantic import ConfigDict, model_validator

from apps.backends.render.names import is_label_value, is_qualified_name
from apps.backends.render.spec import Toleration
from apps.core.text import N_, Text
from apps.fleet.inventory import is_node_state_taint
from apps.workloads.specs.fields import Check, Problems, SpecModel, described

OPERATORS = ("Equal", "Exists")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_TOLERATIONS = 16


def _key_error(key: str) -> Text | None:
    if not is_qualified_name(key):
        return N_(
            "%(key)r is not a taint key: [prefix/]name, the name at most 63 letters, digits, '-', '_' and '.'; "
            "a toleration of every taint is not allowed",
            key=key,
        )
    if is_node_state_taint(key):
        return N_(
            "%(key)r marks a node's own state (cordoned, not ready, being removed, awaiting repair): work is "
            "never placed past it",
            key=key,
        )
    return None


def _value_error(value: str) -> Text | None:
    if is_label_value(value):
        return None
    return N_("%(value)r is not a taint value (at most 63 letters, digits, '-', '_' and '.')", value=value)


class TolerationModel(SpecModel):
    model_config = ConfigDict(title="Toleration")
    SPEC = Toleration

    key: Annotated[str, Check(_key_error, (("maxLength", 317),))] = described(
        N_("Taint key"), N_("e.g. dedicated or example.com/spot")
    )
    operator: Literal[OPERATORS] = described(  # type: ignore[valid-type]
        N_("Operator"), N_("Equal: this key and value; Exists: any value of the key"), "Equal"
    )
    value: Annotated[str, Check(_value_error, (("maxLength", 63),))] = described(
        N_("Taint value"), N_("Empty with Exists"), ""
    )
    effect: Literal[("", *EFFECTS)] = described(N_("Effect"), N_("Empty: every effect"), "")  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _exists_has_no_value(self) -> TolerationModel:
        problems = Problems()
        if self.operator == "Exists" and self.value:
            problems.add("value", N_("must be empty with operator Exists (it matches every value of the key)"))
        problems.check()
        return self
