"""GPU shares on pages: "6 3/7", never a float like 6.428571 (apps/backends/shares.py).

{% load shares %}
{{ quota.used|units }}          an amount the admission engine counts (units of 1/SHARE_UNITS GPU)
{{ claim.gpus|gpus }}           an exact number of GPUs (int or Fraction)
"""

from __future__ import annotations

from fractions import Fraction

from django import template

from apps.backends.shares import SHARE_UNITS, format_share

register = template.Library()


@register.filter
def units(value) -> str:
    """Units of 1/SHARE_UNITS GPU as a share ("3/7"); infinity as "∞"; anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if value == float("inf"):
        return "∞"
    return format_share(int(value), SHARE_UNITS)


@register.filter
def gpus(value) -> str:
    """A number of GPUs as a share ("6 3/7")."""
    if isinstance(value, bool) or not isinstance(value, int | Fraction):
        return value
    return format_share(value)
