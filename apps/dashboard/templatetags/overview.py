"""Small formatters for the overview panels, as tags: they render in table cells many times per page."""

from __future__ import annotations

from fractions import Fraction

from django import template
from django.contrib.humanize.templatetags.humanize import intcomma
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from apps.backends.shares import format_share

register = template.Library()

STATE_LABELS = {
    "allocated": _("allocated"),
    "free": _("free"),
    "cordoned": _("cordoned / down"),
    "unhealthy": _("unhealthy"),
}
STATE_COLOURS = {"allocated": "bg-primary", "free": "bg-success", "cordoned": "bg-warning", "unhealthy": "bg-danger"}


@register.simple_tag
def demand_cell(allocated, pending) -> str:
    """GPUs held, then "+N" asked for by pending workloads; a dash when there are neither. Shares show as
    shares ("6 3/7")."""
    if not allocated and not pending:
        return mark_safe('<span class="text-body-secondary">—</span>')
    if not pending:
        return _gpus(allocated)
    return format_html('{} <span class="text-warning-emphasis small">+{}</span>', _gpus(allocated), _gpus(pending))


def _gpus(value) -> str:
    """Whole GPUs with thousands separators, shares as "6 3/7"."""
    if isinstance(value, Fraction) and value.denominator != 1:
        return format_share(value)
    return intcomma(int(value))


@register.simple_tag
def state_bar(states) -> str:
    """A stacked bar of a GpuStates row: allocated, free, cordoned / down, unhealthy, as shares of its total."""
    bars = [(state, n, pct) for state, n, pct in states.bars if n]
    inner = format_html_join(
        "",
        '<div class="progress" role="progressbar" aria-label="{}" aria-valuenow="{}" aria-valuemin="0" '
        'aria-valuemax="{}" style="width: {}%" title="{}"><div class="progress-bar {}"></div></div>',
        (
            (
                STATE_LABELS[s],
                n,
                states.total,
                f"{pct:.2f}",
                gettext("%(state)s: %(gpus)s GPUs") % {"state": STATE_LABELS[s], "gpus": intcomma(n)},
                STATE_COLOURS[s],
            )
            for s, n, pct in bars
        ),
    )
    return format_html('<div class="progress-stacked state-bar">{}</div>', inner)
