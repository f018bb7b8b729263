"""Users, tenant memberships with a role, and hashed, scoped API tokens."""

from __future__ import annotations

import hashlib

from django.contrib.auth.models import AbstractUser
from django.contrib.auth.models import UserManager as BaseUserManager
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.accounts.roles import GLOBAL_ROLES, TENANT_ROLES, Role


class UserQuerySet(models.QuerySet):
    def for_user(self, user, action: str) -> UserQuerySet:
        """Yourself, and users holding a role on a tenant you may `action` on; console-wide viewers see all."""
        from apps.accounts.permissions import allowed_tenant_ids

        ids = allowed_tenant_ids(user, action)
        if ids is None:
            return self
        return self.filter(Q(pk=user.pk) | Q(memberships__tenant_id__in=ids) | Q(owner_tenant_id__in=ids)).distinct()


class UserManager(BaseUserManager.from_queryset(UserQuerySet)):
    pass


class User(AbstractUser):
    """A person, or a service account that CI pipelines act as (no password, tokens only)."""

    is_service_account = models.BooleanField(default=False)
    # The tenant whose admins manage this service account; empty for people.
    owner_tenant = models.ForeignKey(
        "tenancy.Tenant", null=True, blank=True, on_delete=models.PROTECT, related_name="service_accounts"
    )

    objects = UserManager()

    class Meta(AbstractUser.Meta):
        swappable = "AUTH_USER_MODEL"
        constraints = [
            models.CheckConstraint(
                condition=Q(is_service_account=False) | Q(owner_tenant__isnull=False),
                name="service_account_has_owner_tenant",
                violation_error_message="A service account must belong to a tenant.",
            ),
        ]


class MembershipQuerySet(models.QuerySet):
    def for_user(self, user, action: str) -> MembershipQuerySet:
        """Memberships in tenants the user may `action` on, plus the user's own."""
        from apps.accounts.permissions import allowed_tenant_ids

        ids = allowed_tenant_ids(user, action)
        if ids is None:
            return self
        return self.filter(Q(tenant_id__in=ids) | Q(user_id=user.pk))


class Membership(models.Model):
    """A user's role on one tenant, or a console-wide role (platform-admin, on-call, global viewer)."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(
        "tenancy.Tenant", null=True, blank=True, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__path", "user__username"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "tenant"],
                condition=Q(tenant__isnull=False),
                name="membership_one_role_per_tenant",
                violation_error_message="This user already has a role on this tenant.",
            ),
            models.UniqueConstraint(
                fields=["user", "role"],
                condition=Q(tenant__isnull=True),
                name="membership_global_role_once",
                violation_error_message="This user already has this console-wide role.",
            ),
            models.CheckConstraint(
                condition=~Q(role__in=sorted(GLOBAL_ROLES)) | Q(tenant__isnull=True),
                name="membership_global_role_no_tenant",
                violation_error_message="platform-admin and on-call are console-wide roles: leave the tenant empty.",
            ),
            models.CheckConstraint(
                condition=~Q(role__in=sorted(TENANT_ROLES)) | Q(tenant__isnull=False),
                name="membership_tenant_role_needs_tenant",
                violation_error_message="tenant-admin and member need a tenant.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} on {self.tenant or 'all tenants'}"


class ApiTokenQuerySet(models.QuerySet):
    def for_user(self, user, action: str) -> ApiTokenQuerySet:
        """Your own tokens, and for tenant admins the tokens of their tenants' service accounts."""
        from apps.accounts.permissions import allowed_tenant_ids

        ids = allowed_tenant_ids(user, "manage")
        if ids is None:
            return self
        return self.filter(Q(user_id=user.pk) | Q(user__is_service_account=True, user__owner_tenant_id__in=ids))

    def active(self) -> ApiTokenQuerySet:
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def token_digest(raw: str) -> str:
    """Tokens carry 256 random bits, so a fast hash is enough; we never store or log the raw value."""
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for automation: acts as `user`, narrowed to one tenant (or console-wide) and one role."""

    name = models.CharField(max_length=100)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    tenant = models.ForeignKey("tenancy.Tenant", null=True, blank=True, on_delete=models.CASCADE)
    role = models.CharField(max_length=20, choices=Role.choices)
    prefix = models.CharField(max_length=16, db_index=True, help_text="The first characters, to recognise it.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(User, null=True, on_delete=models.SET_NULL, related_name="+")
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(role__in=sorted(TENANT_ROLES)) | Q(tenant__isnull=False),
                name="token_tenant_role_needs_tenant",
                violation_error_message="A tenant-admin or member token needs a tenant.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def status(self) -> str:
        if self.revoked_at:
            return "revoked"
        if self.expires_at and self.expires_at <= timezone.now():
            return "expired"
        return "active"
