"""Template helpers for the console's pages."""

from __future__ import annotations

import json

from django import forms, template

register = template.Library()


@register.filter
def bs(field: forms.BoundField) -> str:
    """Render a form field's widget with Bootstrap's classes (and is-invalid when it has errors)."""
    widget = field.field.widget
    if isinstance(widget, forms.CheckboxInput):
        css = "form-check-input"
    elif isinstance(widget, forms.Select | forms.SelectMultiple | forms.NullBooleanSelect):
        css = "form-select form-select-sm"
    else:
        css = "form-control form-control-sm"
    if field.errors:
        css += " is-invalid"
    return field.as_widget(attrs={"class": css})


@register.filter
def pretty_json(value) -> str:
    if value is None or value == "":
        return ""
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False)


@register.filter
def status_badge(status: str) -> str:
    return {
        "pending": "secondary",
        "running": "primary",
        "succeeded": "success",
        "failed": "danger",
        "active": "success",
        "revoked": "secondary",
        "expired": "warning",
    }.get(str(status), "secondary")


@register.filter
def label(code, context: str) -> str:
    """A stored code shown as a word in the reader's language: {{ node.state|label:"node state" }}.

    English shows the code itself; the contexts and codes are in apps/core/value_labels.py.
    """
    from apps.core.value_labels import value_label

    return value_label(code, context)


@register.filter
def stored(text):
    """Stored English (an admission or workload reason, a workload event, an incident title) in the reader's
    language, when one of the console's own templates made it: {{ workload.state_reason|stored }}.

    The text is kept in English where it is stored; see apps/core/stored_text.py."""
    from apps.core.stored_text import translate_stored

    return translate_stored(text)
