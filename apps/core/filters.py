"""Small pieces shared by the FilterSets."""

from django import forms
from django.utils.translation import gettext_lazy as _


def yes_no_any() -> forms.Select:
    """A boolean filter widget that reads "Any / Yes / No" instead of Django's "Unknown / Yes / No"."""
    return forms.Select(choices=[("", _("Any")), ("true", _("Yes")), ("false", _("No"))])
