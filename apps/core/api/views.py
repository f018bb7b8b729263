"""Base viewset: every queryset starts from the model's `for_user(user, action)`."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import viewsets


class ScopedViewSetMixin:
    """Reads start from `Model.objects.for_user(request.user, "view")`: cross-tenant rows do not exist here.

    Subclasses set `model`; writes go through services which check the stronger action themselves.
    """

    model = None
    select_related: tuple[str, ...] = ()

    def get_queryset(self) -> QuerySet:
        qs = self.model.objects.for_user(self.request.user, "view")
        if self.select_related:
            qs = qs.select_related(*self.select_related)
        if not qs.ordered:  # pages of an unordered list may repeat or skip rows
            qs = qs.order_by("pk")
        return qs


class ScopedReadOnlyViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    pass
