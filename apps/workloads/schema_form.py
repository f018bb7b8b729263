"""Form fields generated from a spec's JSON Schema, and the way back: form data to a spec.

The submit page's form is not written by hand: it is built from the JSON Schema the API validates with
(`apps.workloads.specs.json_schema(kind)`: pydantic's `model_json_schema`, draft 2020-12), so the form and the API
cannot drift. Each property's `title` and `description` (English marked for translation where the models declare
them) become the label and the help text, `x-group` the section, `default` the placeholder, and the type its input:

    integer, number          -> a number input with min/max (minimum/maximum, exclusive ones, and the step)
    string with enum         -> a select (an empty first option while the field is optional: its default applies)
    string                   -> a text input (maxLength)
    boolean                  -> a checkbox
    object with properties   -> a fieldset of its own fields, named "parent.child" (sharing, elastic, autoscaling)
    array of strings         -> a textarea, one item per line
    object of strings        -> a textarea of KEY=VALUE lines (env)
    array of objects         -> rows of their fields, named "parent.0.child" (secret_env: name, secret, key)

`$ref`s into `$defs` are followed, and an `anyOf` with `{"type": "null"}` is an optional field of the other type
(where a field also takes a shorthand string, e.g. sharing "whole", the object form is the form's).

`spec_from_data` reads the posted values back into a spec, leaving out what is empty so that the API's defaults
apply; `data_from_spec` is its inverse (a template or the YAML box filling the form). A caller may set a field's
choices (`choices`: the user's queues, the catalog's GPU models) or leave a field out (`skip`: the kind, which the
page chooses).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from django.utils.translation import gettext, pgettext

GROUPS = ("basics", "container", "resources", "sharing", "serving", "advanced")
MAX_ROWS_SHOWN = 2  # empty rows offered under a list of objects (secret_env, volumes): more come with "Add a row"


@dataclass
class FormField:
    """One input (or a fieldset, or a list of rows) of the generated form. `name` is the spec path ("workers",
    "sharing.mode", "secret_env.0.name"); `value` is what the input shows (a string, a bool for a checkbox)."""

    name: str
    widget: str  # text, number, select, checkbox, lines, keyvalue, fieldset, rows
    label: str
    help: str = ""
    group: str = "advanced"
    required: bool = False
    placeholder: str = ""
    minimum: float | None = None
    maximum: float | None = None
    step: str = ""
    max_length: int | None = None
    choices: list[tuple[str, str]] = field(default_factory=list)
    option_data: dict[str, str] = field(default_factory=dict)  # choice value -> its option's data-queues
    children: list[FormField] = field(default_factory=list)  # a fieldset's fields; rows: one template row
    rows: list[list[FormField]] = field(default_factory=list)  # rows: each row's fields
    value: Any = ""
    errors: list[str] = field(default_factory=list)
    default: Any = None

    @property
    def input_id(self) -> str:
        return "f-" + self.name.replace(".", "-")

    @property
    def choice_values(self) -> list[str]:
        return [value for value, _label in self.choices]

    @property
    def options(self) -> list[tuple[str, str, str]]:
        """(value, label, data) of each choice: data is what the option says for the page's script (the queues
        bound to a cluster)."""
        return [(value, label, self.option_data.get(value, "")) for value, label in self.choices]

    @property
    def is_group(self) -> bool:
        return self.widget in {"fieldset", "rows"}

    def walk(self):
        """This field and every field below it."""
        yield self
        for child in self.children:
            yield from child.walk()
        for row in self.rows:
            for cell in row:
                yield from cell.walk()


@dataclass
class Section:
    """The fields of one x-group, in the schema's order."""

    key: str
    title: str
    fields: list[FormField]


class SchemaForm:
    """The form of one kind's JSON Schema, bound to posted data (flat: input name -> string) or to nothing."""

    def __init__(
        self,
        schema: dict,
        data: Mapping[str, Any] | None = None,
        *,
        choices: dict[str, list[tuple[str, str]]] | None = None,
        option_data: dict[str, dict[str, str]] | None = None,
        skip: tuple[str, ...] = (),
    ) -> None:
        self.schema = schema
        self.data = data or {}
        self.choices = choices or {}
        self.option_data = option_data or {}
        self.skip = skip

    # --- the schema --------------------------------------------------------------------------------------------

    def resolve(self, node: dict) -> dict:
        """`node` with its `$ref` followed and an optional (anyOf with null) unwrapped; the outer title,
        description and default win over the referenced schema's."""
        if not isinstance(node, dict):
            return {}
        outer = {k: v for k, v in node.items() if k not in {"$ref", "anyOf", "oneOf", "allOf"}}
        inner: dict = {}
        if "$ref" in node:
            inner = self.resolve(self._ref(node["$ref"]))
        elif "allOf" in node and len(node["allOf"]) == 1:
            inner = self.resolve(node["allOf"][0])
        elif "anyOf" in node or "oneOf" in node:
            options = [self.resolve(o) for o in node.get("anyOf") or node.get("oneOf") or []]
            real = [o for o in options if o.get("type") != "null"]
            inner = next((o for o in real if o.get("type") == "object" or "properties" in o), real[0] if real else {})
            if len(real) < len(options):
                outer.setdefault("x-nullable", True)
        return {**inner, **outer}

    def _ref(self, ref: str) -> dict:
        node: Any = self.schema
        for part in ref.removeprefix("#/").split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return node

    def _properties(self, node: dict) -> list[tuple[str, dict, bool]]:
        required = set(node.get("required") or ())
        return [(name, prop, name in required) for name, prop in (node.get("properties") or {}).items()]

    # --- schema to fields --------------------------------------------------------------------------------------

    def fields(self) -> list[FormField]:
        """The top-level fields (fieldsets carrying their own), in the schema's order, bound to the data."""
        return [
            self._field(name, prop, required)
            for name, prop, required in self._properties(self.resolve(self.schema))
            if name not in self.skip
        ]

    def sections(self) -> list[Section]:
        """The fields by x-group, in GROUPS order (a property without one is "advanced")."""
        titles = {
            "basics": gettext("Basics"),
            "container": gettext("Container"),
            "resources": gettext("Resources"),
            "sharing": gettext("GPU sharing"),
            "serving": gettext("Serving"),
            "advanced": gettext("Advanced"),
        }
        fields = self.fields()
        return [
            Section(group, titles[group], [f for f in fields if f.group == group])
            for group in GROUPS
            if any(f.group == group for f in fields)
        ]

    def field_names(self) -> list[str]:
        """Every input's and group's name (for placing an error)."""
        return [f.name for top in self.fields() for f in top.walk()]

    def _field(self, name: str, raw: dict, required: bool, group: str | None = None) -> FormField:
        """One property as a field; a nested object's fields are required only where the object is (the fields of
        an optional object are required once it is given: the API says so then)."""
        node = self.resolve(raw)
        leaf = name.rsplit(".", 1)[-1]
        out = FormField(
            name=name,
            widget="text",
            label=gettext(node["title"]) if node.get("title") else leaf.replace("_", " ").capitalize(),
            help=gettext(node["description"]) if node.get("description") else "",
            group=group or node.get("x-group") or "advanced",
            required=required,
            default=node.get("default"),
        )
        kind = node.get("type")
        if isinstance(kind, list):  # ["integer", "null"]
            kind = next((k for k in kind if k != "null"), None)
        default = node.get("default")
        if default not in (None, "", [], {}) and not isinstance(default, dict | list):
            out.placeholder = str(default).lower() if isinstance(default, bool) else str(default)
        if name in self.choices:
            out.widget, out.choices = "select", list(self.choices[name])
            out.option_data = self.option_data.get(name, {})
        elif "enum" in node:
            out.widget, out.choices = "select", [(str(v), str(v)) for v in node["enum"] if v is not None]
        elif kind in {"integer", "number"}:
            out.widget = "number"
            out.step = "1" if kind == "integer" else "any"
            out.minimum = node.get("minimum", node.get("exclusiveMinimum"))
            out.maximum = node.get("maximum", node.get("exclusiveMaximum"))
        elif kind == "boolean":
            out.widget = "checkbox"
        elif kind == "object" and "properties" in node:
            out.widget = "fieldset"
            out.children = [
                self._field(f"{name}.{child}", prop, req and required, out.group)
                for child, prop, req in self._properties(node)
            ]
        elif kind == "object":
            out.widget = "keyvalue"
        elif kind == "array":
            items = self.resolve(node.get("items") or {})
            if items.get("type") == "object" or "properties" in items:
                out.widget = "rows"
                out.children = [self._field(f"{name}.#.{c}", p, r, out.group) for c, p, r in self._properties(items)]
                out.rows = [
                    [self._field(f"{name}.{i}.{c}", p, r, out.group) for c, p, r in self._properties(items)]
                    for i in range(self._row_count(name))
                ]
            else:
                out.widget = "lines"
        elif "maxLength" in node:
            out.max_length = node["maxLength"]
        if out.widget not in {"fieldset", "rows"}:
            out.value = self._bound(out)
        return out

    def _row_count(self, name: str) -> int:
        prefix = f"{name}."
        used = {int(key[len(prefix) :].split(".", 1)[0]) for key in self.data if _row_key(key, prefix)}
        return (max(used) + 1 if used else 0) + MAX_ROWS_SHOWN

    def _bound(self, out: FormField):
        if out.widget == "checkbox":
            return _checked(self.data.get(out.name))
        value = self.data.get(out.name, "")
        return "" if value is None else str(value)

    # --- data to spec ------------------------------------------------------------------------------------------

    def spec(self) -> tuple[dict, dict[str, list[str]]]:
        """The spec the data says, without its empty fields (so the API's defaults apply), and the inputs that
        cannot be read (a number that is not one, a KEY=VALUE line without "="), by input name."""
        errors: dict[str, list[str]] = {}
        spec: dict = {}
        for top in self.fields():
            value = self._value(top, errors)
            if value is not _EMPTY:
                spec[top.name] = value
        return spec, errors

    def _value(self, f: FormField, errors: dict[str, list[str]]):
        raw = self.data.get(f.name)
        if f.widget == "fieldset":
            nested = {}
            for child in f.children:
                value = self._value(child, errors)
                if value is not _EMPTY:
                    nested[child.name.rsplit(".", 1)[-1]] = value
            return nested or _EMPTY
        if f.widget == "rows":
            items = []
            for row in f.rows:
                item = {}
                for cell in row:
                    value = self._value(cell, errors)
                    if value is not _EMPTY:
                        item[cell.name.rsplit(".", 1)[-1]] = value
                if item:
                    items.append(item)
            return items or _EMPTY
        if f.widget == "checkbox":
            checked = _checked(raw)
            # Unchecked says "false" only where the default is true; else it is the default, left out.
            return True if checked else (False if f.default is True else _EMPTY)
        text = "" if raw is None else str(raw)
        if f.widget == "lines":
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            return lines or _EMPTY
        if f.widget == "keyvalue":
            pairs = {}
            for number, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                key, sep, value = line.partition("=")
                if not sep or not key.strip():
                    errors.setdefault(f.name, []).append(
                        gettext("Line %(number)s: write KEY=VALUE.") % {"number": number}
                    )
                    continue
                pairs[key.strip()] = value
            return pairs or _EMPTY
        text = text.strip()
        if text == "":
            return _EMPTY
        if f.widget == "number":
            try:
                return int(text) if f.step == "1" else _number(text)
            except ValueError:
                message = gettext("Not a whole number.") if f.step == "1" else gettext("Not a number.")
                errors.setdefault(f.name, []).append(message)
                return _EMPTY
        return text

    # --- spec to data ------------------------------------------------------------------------------------------

    def data_from_spec(self, spec: dict) -> dict[str, str]:
        """The form data that shows `spec` (the inverse of `spec`): flat input name -> string ("on" for a
        checked box); what the form has no input for is left out."""
        data: dict[str, str] = {}
        for top in self.fields():
            if top.name in spec:
                _fill(top, spec[top.name], data)
        return data


_EMPTY = object()


def _checked(value) -> bool:
    return value not in (None, "", False, "false", "off", "0")


def _number(text: str) -> float | int:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def _row_key(key: str, prefix: str) -> bool:
    return key.startswith(prefix) and key[len(prefix) :].split(".", 1)[0].isdigit()


def _fill(f: FormField, value, data: dict[str, str]) -> None:
    if value is None:
        return
    if f.widget == "fieldset":
        if isinstance(value, str):  # a shorthand ("whole") of an object with a mode
            value = {"mode": value}
        if isinstance(value, dict):
            for child in f.children:
                key = child.name.rsplit(".", 1)[-1]
                if key in value:
                    _fill(child, value[key], data)
        return
    if f.widget == "rows":
        if isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    for cell in f.children:
                        key = cell.name.rsplit(".", 1)[-1]
                        if key in item:
                            _fill(replace(cell, name=f"{f.name}.{index}.{key}"), item[key], data)
        return
    if f.widget == "checkbox":
        if value is True:
            data[f.name] = "on"
        return
    if f.widget == "lines":
        data[f.name] = "\n".join(str(v) for v in value) if isinstance(value, list) else str(value)
        return
    if f.widget == "keyvalue":
        data[f.name] = "\n".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else str(value)
        return
    data[f.name] = str(value).lower() if isinstance(value, bool) else str(value)


def field_message(path: str, message) -> str:
    """A message for a field the form does not show where it is, led by the field's path (as apps/core/forms.py
    shows a service's errors: a code, quoted in Chinese)."""
    shown = pgettext("a field the form does not show, and its message", "%(field)s: %(message)s")
    return shown % {"field": path, "message": message}


def place_errors(paths: Mapping[str, list[str]], names: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Errors by spec path ("sharing.mig_profile", "env.FOO", "volumes[0].claim", "command[0]") placed at the
    form's inputs: the input of the same name, else the nearest enclosing one ("env", "volumes"); what has no input
    comes back as general messages, with its path."""
    known = set(names)
    placed: dict[str, list[str]] = {}
    general: list[str] = []
    for path, messages in paths.items():
        dotted = path.replace("[", ".").replace("]", "")
        target = None
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in known:
                target = ".".join(parts[:end])
                break
        if target is None:
            general.extend(field_message(path, m) if path and path != "spec" else str(m) for m in messages)
        else:
            placed.setdefault(target, []).extend(str(m) for m in messages)
    return placed, general
