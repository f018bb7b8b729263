"""pydantic's validation errors as the specs' own: a field path ("workers", "sharing.mig_profile", "env.FOO",
"volumes[0].claim") and an apps.core.text Text, translated where it leaves the service. `MESSAGES` is the one
place that knows pydantic's error types; the checks' own messages (`fields.Check`, `fields.Problems`) pass through."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from annotated_types import Ge, Gt, Le
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from apps.core.text import N_, Text
from apps.workloads.specs.fields import CHECK, PROBLEMS
from apps.workloads.specs.model import SpecError

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Error:
    """One pydantic error, with what its message needs: the field's name, the input's JSON type, the model."""

    root: type[BaseModel]
    loc: Loc
    value: Any
    ctx: dict

    @property
    def name(self) -> str:
        return next((part for part in reversed(self.loc) if isinstance(part, str)), "")

    @property
    def what(self) -> str:
        return type_name(self.value)

    @property
    def field(self) -> FieldInfo | None:
        return _walk(self.root, self.loc)[1]

    @property
    def choices(self) -> tuple:
        """A Literal field's values."""
        return _choices(self.field.annotation if self.field else None)

    @property
    def allowed(self) -> str:
        """The fields of the object an unknown field is in."""
        parent = _walk(self.root, self.loc[:-1])[0]
        return ", ".join(parent.model_fields) if parent else ""


PROGRAM = N_('the program to run is required, e.g. ["python", "train.py"]')
_LISTS = {
    "volumes": lambda t: N_("must be a list of {claim, mount_path, read_only}, not %(type)s", type=t),
    "tolerations": lambda t: N_("must be a list of {key, operator, value, effect}, not %(type)s", type=t),
    "secret_env": lambda t: N_("must be a list of {name, secret, key}, not %(type)s", type=t),
}
MESSAGES: dict[str, Callable[[Error], Text]] = {
    "missing": lambda e: PROGRAM if e.loc == ("command",) else N_("this field is required"),
    "too_short": lambda e: PROGRAM,  # command, the one list with a minimum
    "extra_forbidden": lambda e: _unknown(e),
    "model_type": lambda e: N_("must be a JSON object, not %(type)s", type=e.what),
    "dict_type": lambda e: N_("must be an object of NAME: value strings, not %(type)s", type=e.what),  # env
    "list_type": lambda e: _LISTS.get(e.name, lambda t: N_("must be a list of strings, not %(type)s", type=t))(e.what),
    "too_long": lambda e: _too_many(e),
    "string_type": lambda e: N_("must be a string, not %(type)s", type=e.what),
    "string_unicode": lambda e: _not_one_of(e) if e.choices else N_("is not valid Unicode text (a lone surrogate)"),
    "string_too_long": lambda e: N_(
        "at most %(max)s characters, not %(count)s", max=e.ctx["max_length"], count=len(e.value)
    ),
    "int_type": lambda e: N_("must be an integer, not %(type)s", type=e.what),
    "float_type": lambda e: N_("must be a number, not %(type)s", type=e.what),
    "finite_number": lambda e: N_("must be a number, not %(type)s", type=e.what),
    "bool_type": lambda e: N_("must be true or false, not %(type)s", type=e.what),
    "literal_error": lambda e: _not_one_of(e),
    "greater_than_equal": lambda e: _out_of_range(e),
    "less_than_equal": lambda e: _out_of_range(e),
    "greater_than": lambda e: _out_of_range(e),
}


def spec_error(root: type[BaseModel], exc: ValidationError) -> SpecError:
    """Every error of `exc` at its path; unknown top-level fields first (the likeliest mistake: a typo)."""
    errors = sorted(exc.errors(), key=lambda e: not (e["type"] == "extra_forbidden" and len(e["loc"]) == 1))
    bad_keys = {error["loc"][:-1] for error in errors if error["loc"][-1:] == ("[key]",)}
    fields: dict[str, list[str]] = {}
    for error in errors:
        if error["loc"] in bad_keys:
            continue  # an env entry whose name is refused: the name's message says enough
        loc = tuple(part for part in error["loc"] if part != "[key]")  # a dict key's own error: at its entry
        ctx = error.get("ctx") or {}
        if error["type"] == PROBLEMS:  # at paths in the model: the field validator's is the field's parent
            model = loc[:-1] if ctx["in_field"] else loc
            found = [(model + where, text) for where, text in ctx["found"]]
        elif error["type"] == CHECK:
            found = [(loc, ctx["message"])]
        else:
            unknown = MESSAGES.get(error["type"], lambda e: N_("invalid"))
            found = [(loc, unknown(Error(root, loc, error["input"], ctx)))]
        for where, text in found:
            fields.setdefault(path(where), []).append(text)
    return SpecError(fields)


def path(loc: Loc) -> str:
    out = ""
    for part in loc:
        out = f"{out}[{part}]" if isinstance(part, int) else f"{out}.{part}" if out else part
    return out or "spec"


def _unknown(e: Error) -> Text:
    hint = getattr(_walk(e.root, ())[0], "HINTS", {}).get(e.name) if len(e.loc) == 1 else None
    if hint:
        return N_("unknown field (did you mean %(hint)s?); allowed: %(allowed)s", hint=hint, allowed=e.allowed)
    return N_("unknown field; allowed: %(allowed)s", allowed=e.allowed)


def _too_many(e: Error) -> Text:
    most, count = e.ctx["max_length"], e.ctx["actual_length"]
    if e.name == "env":
        return N_("at most %(max)s variables, not %(count)s", max=most, count=count)
    if e.name == "volumes":
        return N_("at most %(max)s volumes, not %(count)s", max=most, count=count)
    return N_("at most %(max)s items, not %(count)s", max=most, count=count)


def _not_one_of(e: Error) -> Text:
    if not isinstance(e.value, str):
        return N_("must be a string, not %(type)s", type=e.what)
    allowed = ", ".join(choice for choice in e.choices if choice)
    return N_("%(value)r is not one of %(allowed)s", value=e.value, allowed=allowed)


def _out_of_range(e: Error) -> Text:
    metadata = e.field.metadata if e.field else []
    if any(isinstance(m, Gt) for m in metadata):  # gpu_memory_utilization: the one bound that excludes its end
        return N_("must be above 0 and at most 1, not %(value)s", value=f"{e.value:g}")
    lo = next(m.ge for m in metadata if isinstance(m, Ge))
    hi = next(m.le for m in metadata if isinstance(m, Le))
    return N_("must be between %(lo)s and %(hi)s, not %(value)s", lo=lo, hi=hi, value=e.value)


def _walk(root: type[BaseModel], loc: Loc) -> tuple[type[BaseModel] | None, FieldInfo | None]:
    """The model at `loc` (None below a plain value) and the field `loc` ends on."""
    model: type[BaseModel] | None = root
    field = None
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return None, None
        field = model.model_fields[part]
        model = _model_in(field.annotation)
    return model, field


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in get_args(annotation) if (m := _model_in(arg)) is not None), None)


def _choices(annotation: Any) -> tuple:
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    return next((c for arg in get_args(annotation) if (c := _choices(arg))), ())


def type_name(value: object) -> str:
    """What JSON type `value` is, as words for a message ("an integer"); a Text, so messages translate it."""
    if value is None:
        return "null"
    words = {
        bool: N_("a boolean"),
        int: N_("an integer"),
        float: N_("a number"),
        str: N_("a string"),
        list: N_("a list"),
        dict: N_("an object"),
    }
    return words.get(type(value), type(value).__name__)
