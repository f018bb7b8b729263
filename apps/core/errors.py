"""Errors that services raise; the API and the HTML views turn them into 4xx answers with the same message."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from django.db.models import Model, ProtectedError, RestrictedError
from django.utils.text import capfirst
from django.utils.translation import gettext as _


class ServiceError(Exception):
    """A request the service refuses. `fields` maps input field names to messages."""

    status_code = 400
    code = "invalid"
    retry_after: int | None = None  # seconds: the API says when trying again may succeed (Retry-After)

    def __init__(
        self,
        message: str,
        fields: dict[str, list[str] | str] | None = None,
        code: str | None = None,
        data: dict | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message)
        if retry_after is not None:
            self.retry_after = retry_after
        self.message = message
        self.data = data or {}  # extra structured detail for API clients, e.g. a preemption impact
        self.fields = {key: value if isinstance(value, list) else [value] for key, value in (fields or {}).items()}
        if code:
            self.code = code


class InvalidInput(ServiceError):
    status_code = 400
    code = "invalid"


class Forbidden(ServiceError):
    status_code = 403
    code = "permission_denied"


class NotFound(ServiceError):
    status_code = 404
    code = "not_found"


class Conflict(ServiceError):
    status_code = 409
    code = "conflict"


def _blockers(exc: ProtectedError | RestrictedError) -> str:
    """`3 usage records, 2 statements`: what still refers to a row Django would not delete, by kind."""
    counts = Counter(type(obj) for obj in exc.protected_objects if hasattr(obj, "_meta"))
    if not counts:
        return _("other rows")
    return ", ".join(
        f"{count} {model._meta.verbose_name if count == 1 else model._meta.verbose_name_plural}"
        for model, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]._meta.label))
    )


def referenced_conflict(instance: Model | None, exc: ProtectedError | RestrictedError) -> Conflict:
    """The 409 for a delete that rows elsewhere still refer to, naming them."""
    what = _("It")
    if instance is not None:
        what = capfirst(_("%(kind)s “%(name)s”") % {"kind": instance._meta.verbose_name, "name": instance})
    return Conflict(
        _("%(what)s cannot be deleted: %(blockers)s still refer to it.") % {"what": what, "blockers": _blockers(exc)},
        code="protected",
        data={"blocked_by": _blockers(exc)},
    )


@contextmanager
def refuse_if_referenced(instance: Model) -> Iterator[None]:
    """Turn Django's ProtectedError/RestrictedError from deleting `instance` into a Conflict naming what blocks.

    Use inside the service's transaction, so that the audit event written before the delete goes with it."""
    try:
        yield
    except (ProtectedError, RestrictedError) as exc:
        raise referenced_conflict(instance, exc) from exc
