"""Tenants: the organizations and teams that share the GPU fleet."""

from __future__ import annotations

from django.core.validators import MaxLengthValidator
from django.db import models

from apps.core.validators import dns1123_label


class TenantQuerySet(models.QuerySet):
    def for_user(self, user, action: str) -> TenantQuerySet:
        """Tenants on which `user` may do `action` (see apps.accounts.permissions)."""
        from apps.accounts.permissions import allowed_tenant_ids

        ids = allowed_tenant_ids(user, action)
        return self if ids is None else self.filter(id__in=ids)

    def subtree_of(self, tenant: Tenant) -> TenantQuerySet:
        """The tenant and all of its descendants, by materialized path."""
        return self.filter(path__startswith=tenant.path)


class Tenant(models.Model):
    """An organization or a team. Teams nest under organizations to any depth via `parent`.

    `path` is a materialized path of ids ("/1/4/9/") so that subtree checks are one indexed prefix
    query; services keep it in step with `parent`.
    """

    name = models.CharField(max_length=100, validators=[MaxLengthValidator(100)])
    slug = models.CharField(max_length=63, unique=True, validators=[dns1123_label])
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    path = models.CharField(max_length=1000, editable=False, db_index=True, default="")
    description = models.TextField(blank=True, max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["path"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(parent=models.F("id")),
                name="tenant_not_own_parent",
                violation_error_message="A tenant cannot be its own parent.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def depth(self) -> int:
        return max(self.path.count("/") - 2, 0)

    def ancestor_ids(self) -> list[int]:
        """Ids from the root down to and including this tenant."""
        return [int(part) for part in self.path.strip("/").split("/") if part]

    def is_descendant_of(self, other: Tenant) -> bool:
        return self.path.startswith(other.path)
