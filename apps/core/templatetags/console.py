"""Template helpers for the console's pages."""

from __future__ import annotations

import json

from django import forms, template
from django.http import QueryDict
from django.utils.html import format_html_join

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
def hidden_inputs(query: str) -> str:
    """Hidden form fields from a query string ("period=3&action=close"): confirm dialogs post them with the form."""
    pairs = [(name, value) for name, values in QueryDict(query or "").lists() for value in values]
    return format_html_join("", '<input type="hidden" name="{}" value="{}">', pairs)


@register.filter
def dom_id(prefix: str, key) -> str:
    """A unique element id from a prefix and a row's key: "revoke-token"|dom_id:token.pk → "revoke-token-7"."""
    return f"{prefix}-{key}"


@register.inclusion_tag("core/_breadcrumbs.html")
def breadcrumbs(*trail):
    """The trail above a detail page: label, url pairs, then the page's own label.

    {% breadcrumbs _("Workloads") list_url workload.name %}
    """
    *pairs, current = trail
    links = [(str(pairs[i]), pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)]
    return {"links": links, "current": str(current)}


@register.filter
def param(name: str, value) -> str:
    """One query-string pair, for confirm dialogs' hidden fields: "period"|param:p.pk|add:"&action=close"."""
    from urllib.parse import urlencode

    return urlencode({name: value})


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
