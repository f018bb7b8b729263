"""Small pieces shared by the FilterSets."""

from django import forms


def yes_no_any() -> forms.Select:
    """A boolean filter widget that reads "Any / Yes / No" instead of Django's "Unknown / Yes / No"."""
    return forms.Select(choices=[("", "Any"), ("true", "Yes"), ("false", "No")])
