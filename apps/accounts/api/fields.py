"""Naming a tenant in a request body."""

from __future__ import annotations

from django.utils.translation import gettext as _
from rest_framework import serializers

from apps.accounts.models import Tenant
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
