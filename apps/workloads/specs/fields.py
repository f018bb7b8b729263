"""The building blocks of the spec models: a field's description for forms, checks that report a Text, problems
between fields reported at their own paths, and the validation context (the GPU catalog, the node size).

Every model is strict (JSON types only: no "8" for 8, no true for 1) and refuses unknown fields; a refusal is a
pydantic error that `apps.workloads.specs.errors` turns into the field path and message of a SpecError.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo
from pydantic_core import PydanticCustomError, PydanticUndefined, core_schema

from apps.core.text import Text

# The submit form's sections, in order; every top-level field names one as "x-group" in the JSON Schema.
GROUPS = ("basics", "container", "resources", "sharing", "serving", "advanced")
CHECK = "spec"  # a Check's error type; its ctx "message" is the Text
PROBLEMS = "spec_problems"  # a model validator's error type; its ctx "found" is [(path below the model, Text)]


def described(
    title: Text,
    description: Text,
    default: Any = PydanticUndefined,
    group: str | None = None,
    schema: dict | None = None,
    **bounds: Any,
):
    """A field's title and help text (marked with N_: a form shows them in the reader's language), its default,
    its form section (top-level fields; a nested object's fields are in their parent's) and its bounds. `schema`
    adds JSON Schema keywords for a form that a check enforces with its own message (a code's length)."""
    assert group is None or group in GROUPS, group
    extra = {**({"x-group": group} if group else {}), **(schema or {})} or None
    return Field(default, title=str(title), description=str(description), json_schema_extra=extra, **bounds)


basics, container, resources, _, serving, advanced = (partial(described, group=group) for group in GROUPS)


@dataclass(frozen=True, eq=False)
class Check:
    """Validates after the type: `problem(value)` says why a value is refused, or None. `schema` adds the JSON
    Schema keywords the check implies (maxLength, pattern), so a form or client can check before sending."""

    problem: Callable[[Any], Text | None]
    schema: tuple[tuple[str, Any], ...] = ()

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._validate, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict:
        return {**handler(schema), **dict(self.schema)}

    def _validate(self, value: Any) -> Any:
        if (problem := self.problem(value)) is not None:
            raise PydanticCustomError(CHECK, "{message}", {"message": problem})
        return value


class Problems:
    """What a validator finds between fields, each at its path in the model (("sharing", "mig_profile"),
    ("extra_args", 2)); `check(info)` raises them all at once.

    A check between fields is a field validator on the last of them when it can be (pydantic validates the fields
    in order, and `info.data` holds the earlier ones that are valid): it then runs whenever the fields it
    compares are valid, whatever else is wrong, and every error is reported at once, as parse_spec always did."""

    def __init__(self) -> None:
        self.found: list[tuple[tuple[str | int, ...], Text]] = []

    def add(self, path: str | tuple[str | int, ...], message: Text) -> None:
        self.found.append(((path,) if isinstance(path, str) else path, message))

    def check(self, info: ValidationInfo | None = None) -> None:
        """Raise what was found, at paths below the model or field validated; with a field validator's `info`, at
        paths beside the field (other fields of its model)."""
        if self.found:
            in_field = info is not None and info.field_name is not None
            raise PydanticCustomError(PROBLEMS, "{found}", {"found": self.found, "in_field": in_field})


class SpecModel(BaseModel):
    """A spec or a part of one: JSON types only, unknown fields refused. `HINTS` points a field written at the
    wrong level to where it belongs ("mig_profile" -> "sharing.mig_profile")."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
    HINTS: ClassVar[dict[str, str]] = {}
    SPEC: ClassVar[type]  # the renderers' dataclass (apps.backends.render.spec) this model becomes

    def spec(self, **derived: Any) -> Any:
        """The renderers' dataclass of this model: its fields of the same name, and `derived` (what the model
        computes: a share of a GPU, a resolved gang size)."""
        fields = type(self).model_fields
        values = {
            f.name: _plain(getattr(self, f.name))
            for f in dataclasses.fields(self.SPEC)
            if f.name in fields and f.name not in derived
        }
        return self.SPEC(**values, **derived)


def null_is_default(cls: type[SpecModel], value: Any, info: ValidationInfo) -> Any:
    """For `field_validator(..., mode="before")`: null means the field's default (an absent object or list)."""
    if value is None and info.field_name is not None:
        return cls.model_fields[info.field_name].get_default(call_default_factory=True)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, SpecModel):
        return value.spec()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return dict(value) if isinstance(value, dict) else value


def catalog(info: ValidationInfo) -> dict[str, dict]:
    """The GPU model catalog `parse_spec` validates against: {code: {"memory_mib", "mig_profiles", ...}}."""
    return (info.context or {})["catalog"]


def gpus_per_node(info: ValidationInfo) -> int:
    """The node size a gang or a replica must fit (the GPU model's nodes in the target cluster)."""
    return (info.context or {})["gpus_per_node"]
