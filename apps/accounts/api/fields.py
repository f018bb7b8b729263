"""Naming a tenant or a user in a request body: what is outside the requester's view does not exist for them."""

from __future__ import annotations

from django.utils.translation import gettext as _
from rest_framework import serializers

from apps.accounts.models import Tenant, User
from apps.core.errors import NotFound


class TenantField(serializers.SlugRelatedField):
    """A tenant by slug, among those the requesting user may view. A tenant outside that view answers exactly as
    one that does not exist: 404 `not_found` naming the field, never 403 "You may not manage tenant …" nor a 400
    "does not exist", so a request body cannot probe which slugs are taken (docs/permissions.md)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("slug_field", "slug")
        kwargs.setdefault("queryset", Tenant.objects.all())
        super().__init__(**kwargs)

    def get_queryset(self):
        request = self.context.get("request")
        queryset = super().get_queryset()
        return queryset.for_user(request.user, "view") if request is not None else queryset.none()

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        tenant = self.get_queryset().filter(slug=data).first()
        if tenant is None:
            raise NotFound(_("No tenant %(slug)s.") % {"slug": repr(data)}, {self.field_name: _("Not found.")})
        return tenant


class VisibleUserField(serializers.SlugRelatedField):
    """A user by username, among those the requester may view (docs/permissions.md, "users"): anyone else answers
    as a username nobody has (404 `not_found`), so a body cannot probe who exists or which tenant owns an account."""

    def __init__(self, **kwargs):
        kwargs.setdefault("slug_field", "username")
        kwargs.setdefault("queryset", User.objects.all())
        super().__init__(**kwargs)

    def get_queryset(self):
        request = self.context.get("request")
        queryset = super().get_queryset()
        return queryset.for_user(request.user, "view") if request is not None else queryset.none()

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        user = self.get_queryset().filter(username=data).first()
        if user is None:
            raise NotFound(_("No user %(username)s.") % {"username": repr(data)}, {self.field_name: _("Not found.")})
        return user
