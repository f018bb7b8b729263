"""Helpers for HTML forms that call services."""

from django import forms
from django.utils.translation import pgettext

from apps.core.errors import ServiceError


def apply_service_error(form: forms.Form, exc: ServiceError) -> None:
    """Show a service's refusal on the form: field messages on their fields, the rest at the top."""
    placed = False
    for field, messages in exc.fields.items():
        target = field if field in form.fields else None
        for message in messages:
            if target:
                form.add_error(target, message)
            else:
                # The input's own name for the field leads ("image", "sharing.mig_profile"): a code, quoted in Chinese.
                shown = pgettext("a field the form does not show, and its message", "%(field)s: %(message)s")
                form.add_error(None, shown % {"field": field, "message": message})
            placed = True
    # The message says what happened ("bob already has a role there"); field notes say where. A generic headline
    # ("Invalid quota.") adds nothing to them; in every language it starts with the word translated here.
    generic = exc.message.startswith(("Invalid", pgettext("start of a generic error headline", "Invalid")))
    if not placed or not generic:
        form.add_error(None, exc.message)
