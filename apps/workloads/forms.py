"""The submit page's form: the spec's fields generated from its JSON Schema (apps/workloads/schema_form.py) or the
same spec as YAML, and the choices it offers (the user's queues, their clusters, the catalog, the tiers)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import yaml
from django import forms
from django.utils.translation import gettext_lazy as _

from apps.accounts.roles import Action
from apps.core.jsondepth import BoundedJSONDecoder, json_problem, too_deep_message
from apps.workloads.models import WorkloadKind

MAX_SPEC_TEXT = 256 * 1024  # characters of the YAML/JSON box: a spec is a few hundred


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without anchors and aliases: a spec needs none, and aliases nested in aliases make a few lines of text
    expand to billions of items (the "billion laughs")."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases (*name) are not accepted in a spec", event.start_mark
            )
        return super().compose_node(parent, index)


def load_spec_text(text: str) -> dict:
    """The spec in the YAML box (YAML, or JSON, which is YAML too), or ValidationError saying where it is wrong."""
    if len(text) > MAX_SPEC_TEXT:
        raise forms.ValidationError(_("At most %(max)s characters.") % {"max": MAX_SPEC_TEXT})
    if not text.strip():
        return {}
    if text.lstrip()[:1] in "{[":  # JSON: its own decoder, bounded in depth as the API's
        try:
            value = json.loads(text, cls=BoundedJSONDecoder)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                _("Not valid JSON: %(error)s at line %(line)s, column %(column)s.")
                % {"error": exc.msg, "line": exc.lineno, "column": exc.colno}
            ) from exc
    else:
        try:
            value = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader without aliases
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or str(exc)
            if mark is None:
                raise forms.ValidationError(_("Not valid YAML: %(error)s.") % {"error": problem}) from exc
            raise forms.ValidationError(
                _("Not valid YAML: %(error)s at line %(line)s, column %(column)s.")
                % {"error": problem, "line": mark.line + 1, "column": mark.column + 1}
            ) from exc
        except RecursionError as exc:
            raise forms.ValidationError(_("Not valid YAML: %(error)s.") % {"error": too_deep_message()}) from exc
        if (problem := json_problem(value)) is not None:
            raise forms.ValidationError(_("Not valid YAML: %(error)s.") % {"error": problem})
    if not isinstance(value, dict):
        raise forms.ValidationError(_("The spec is a mapping of fields (name: value), not a list or a single value."))
    return value


def dump_spec(spec: dict) -> str:
    """A spec as the YAML box shows it: block style, in the order of its fields."""
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)


@dataclass
class SubmitChoices:
    """What the submit form offers: the user's queues (tenants where they may submit), the clusters those queues
    are bound to, the GPU models of the catalog and the priority tiers."""

    queues: list[tuple[str, str]]
    clusters: list[tuple[str, str]]
    cluster_queues: dict[str, list[str]]  # cluster name -> the "tenant/queue" values bound to it
    gpu_models: list[tuple[str, str]]
    tiers: list[tuple[str, str]]

    @classmethod
    def for_user(cls, user) -> SubmitChoices:
        from apps.tenancy.models import Queue, QueueBinding
        from apps.tenancy.snapshot import tier_rows
        from apps.workloads.submission_context import gpu_models

        queues = list(
            Queue.objects.for_user(user, Action.SUBMIT)
            .filter(tenant__archived_at__isnull=True)
            .select_related("tenant")
            .order_by("tenant__slug", "name")
        )
        by_value = {q.pk: f"{q.tenant.slug}/{q.name}" for q in queues}
        cluster_queues: dict[str, list[str]] = {}
        for queue_id, cluster in QueueBinding.objects.filter(queue_id__in=by_value).values_list(
            "queue_id", "cluster__name"
        ):
            cluster_queues.setdefault(cluster, []).append(by_value[queue_id])
        return cls(
            queues=[(value, value) for value in by_value.values()],
            clusters=[(name, name) for name in sorted(cluster_queues)],
            cluster_queues=cluster_queues,
            gpu_models=[(m.code, f"{m.name} ({m.code})") for m in sorted(gpu_models().values(), key=lambda m: m.code)],
            tiers=[(t.name, t.name) for t in sorted(tier_rows(), key=lambda t: -t.value)],
        )


def _split_queue(spec: dict) -> dict:
    """The form's one queue choice ("tenant/queue") as the spec's tenant and queue, in that order."""
    queue = spec.get("queue")
    if not isinstance(queue, str) or "/" not in queue:
        return spec
    tenant, name = queue.split("/", 1)
    out = {}
    for key, value in spec.items():
        if key == "queue":
            out["tenant"], out["queue"] = tenant, name
        else:
            out[key] = value
    return out


class SpecForm:
    """The submit page's spec: the fields generated from the kind's JSON Schema (apps/workloads/schema_form.py), or
    the same spec as YAML (`mode` "yaml": the box named `spec`, JSON accepted). The tenant and the queue are one
    choice among the user's queues ("tenant/queue"); the cluster, the GPU model and the tier are choices too."""

    FIELDS, YAML = "fields", "yaml"

    def __init__(self, user, kind: str, data=None, *, spec: dict | None = None, choices: SubmitChoices | None = None):
        from apps.workloads.spec_schema import schema_for

        self.kind = kind if kind in WorkloadKind.values else WorkloadKind.TRAINING
        self.choices = choices or SubmitChoices.for_user(user)
        self.schema = schema_for(self.kind)
        data = data if data is not None else {}
        # A post that only has the box (the API's JSON, a script) is in YAML mode; the page says which it sends.
        self.mode = data.get("mode") or (self.YAML if "spec" in data and not self._has_fields(data) else self.FIELDS)
        self.errors: dict[str, list[str]] = {}  # by input name ("workers", "sharing.mode", "spec" for the box)
        self.general: list[str] = []
        self.text = data.get("spec", "") if self.mode == self.YAML else ""
        if spec is not None:  # a template, an example, or the YAML box going back to fields
            self.data = self._data_from_spec(spec)
        else:
            self.data = {k: data.get(k) for k in data if k not in {"spec", "mode", "csrfmiddlewaretoken"}}

    def _has_fields(self, data) -> bool:
        return any(key not in {"spec", "kind", "template", "mode", "csrfmiddlewaretoken"} for key in data)

    def _schema_form(self, data=None):
        from apps.workloads.schema_form import SchemaForm

        return SchemaForm(
            self.schema,
            data if data is not None else self.data,
            skip=("kind", "tenant"),
            option_data={"cluster": {c: " ".join(q) for c, q in self.choices.cluster_queues.items()}},
            choices={
                "queue": self.choices.queues,
                "cluster": self.choices.clusters,
                "gpu_model": self.choices.gpu_models,
                "tier": self.choices.tiers,
            },
        )

    def _data_from_spec(self, spec: dict) -> dict:
        spec = dict(spec)
        if spec.get("tenant") and spec.get("queue"):
            spec["queue"] = f"{spec['tenant']}/{spec['queue']}"
        return self._schema_form({}).data_from_spec(spec)

    def spec(self) -> dict | None:
        """The spec the form says (None, with `errors`, when it cannot be read): from the fields or the YAML box."""
        if self.mode == self.YAML:
            try:
                spec = load_spec_text(self.text or "")
            except forms.ValidationError as exc:
                self.errors["spec"] = list(exc.messages)
                return None
            return spec
        spec, errors = self._schema_form().spec()
        self.errors.update(errors)
        return None if errors else _split_queue(spec)

    def yaml_text(self) -> str:
        """The spec as the YAML box shows it (what the box holds in YAML mode)."""
        if self.mode == self.YAML:
            return self.text
        spec, _errors = self._schema_form().spec()
        return dump_spec({"kind": self.kind, **_split_queue(spec)}) if spec else ""

    def add_errors(self, fields: dict) -> None:
        """Errors by spec path (InvalidInput.fields, SpecError.fields) placed at the inputs they belong to; in YAML
        mode all of them at the box, each with its path."""
        from apps.workloads.schema_form import field_message, place_errors

        paths = {path: messages if isinstance(messages, list) else [messages] for path, messages in fields.items()}
        if "tenant" in paths:  # the tenant is chosen with the queue
            paths.setdefault("queue", []).extend(paths.pop("tenant"))
        if self.mode == self.YAML:
            self.errors.setdefault("spec", []).extend(
                field_message(path, m) if path not in ("", "spec") else str(m) for path, ms in paths.items() for m in ms
            )
            return
        placed, general = place_errors(paths, self._schema_form().field_names())
        for name, messages in placed.items():
            self.errors.setdefault(name, []).extend(messages)
        self.general.extend(general)

    def sections(self):
        """The generated form's sections, each field bound to the data and carrying its errors."""
        sections = self._schema_form().sections()
        for section in sections:
            for top in section.fields:
                for f in top.walk():
                    f.errors = self.errors.get(f.name, [])
        return sections

    def field_names(self) -> list[str]:
        return self._schema_form().field_names()

    def without_inputs(self, spec: dict) -> list[str]:
        """Top-level fields of `spec` the form has no input for (unknown ones: the API names them when submitted)."""
        shown = {name for name in self.field_names() if "." not in name} | {"kind", "tenant"}
        return sorted(key for key in spec if key not in shown)
