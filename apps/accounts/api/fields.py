"""Naming a tenant or a user in a request body: what is outside the requester's view does not exist for them."""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from rest_framework import serializers

from apps.accounts.models import Tenant, User
from apps.core.errors import NotFound


class _VisibleSlugField(serializers.SlugRelatedField):
    """A row by its slug among those the requesting user may view; any other answers as one nobody created."""

    model = None
    slug = ""
    missing = ""  # the 404 message, with %(slug)s

    def __init__(self, **kwargs):
        kwargs.setdefault("slug_field", self.slug)
        kwargs.setdefault("queryset", self.model.objects.all())
        super().__init__(**kwargs)

    def get_queryset(self):
        request = self.context.get("request")
        queryset = super().get_queryset()
        return queryset.for_user(request.user, "view") if request is not None else queryset.none()

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        found = self.get_queryset().filter(**{self.slug_field: data}).first()
        if found is None:
            raise NotFound(_(self.missing) % {"slug": repr(data)}, {self.field_name: _("Not found.")})
        return found


class TenantField(_VisibleSlugField):
    """A tenant by slug, among those the requesting user may view. A tenant outside that view answers exactly as
    one that does not exist: 404 `not_found` naming the field, never 403 "You may not manage tenant …" nor a 400
    "does not exist", so a request body cannot probe which slugs are taken (docs/permissions.md)."""

    model, slug, missing = Tenant, "slug", gettext_noop("No tenant %(slug)s.")


class VisibleUserField(_VisibleSlugField):
    """A user by username, among those the requester may view (docs/permissions.md, "users"): anyone else answers
    as a username nobody has (404 `not_found`), so a body cannot probe who exists or which tenant owns an account."""

    model, slug, missing = User, "username", gettext_noop("No user %(slug)s.")
