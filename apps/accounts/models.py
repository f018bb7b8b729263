"""The tenant tree, users, tenant memberships with a role, and hashed, scoped API tokens.

The tenant tree lives here, below everything that is scoped by tenant: a membership, a token and
the permission checks all need a tenant, and every higher app narrows its rows to tenants through
`TenantScopedQuerySet`. Its table keeps its first name (`tenancy_tenant`), from when it lived in
apps.tenancy.
"""

from __future__ import annotations

import hashlib

from django.contrib.auth.models import AbstractUser
from django.contrib.auth.models import UserManager as BaseUserManager
from django.core.validators import MaxLengthValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.accounts.roles import GLOBAL_ROLES, TENANT_ROLES, Role
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

    def live(self) -> TenantQuerySet:
        """Tenants not archived: what lists and pickers offer."""
        return self.filter(archived_at__isnull=True)


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
    # Archived: hidden from lists and pickers, read-only, kept for its statements and audit trail (a tenant with
    # history cannot be deleted). Set and cleared by apps.tenancy.services.tenants (archive / unarchive).
    archived_at = models.DateTimeField(null=True, blank=True)

    objects = TenantQuerySet.as_manager()

    # Audit events and operations name their target by model label; tenants were "tenancy.tenant"
    # before the model moved here, and the trail (and saved filters on it) keep that name.
    audit_target_type = "tenancy.tenant"

    class Meta:
        # Created by apps.tenancy's first migration; the model moved here without moving its rows.
        db_table = "tenancy_tenant"
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


class TenantScopedQuerySet(models.QuerySet):
    """Rows that belong to a tenant through `tenant_field`; visible where the user may `action` on it."""

    tenant_field = "tenant"

    def for_user(self, user, action: str):
        from apps.accounts.permissions import allowed_tenant_ids

        ids = allowed_tenant_ids(user, action)
        return self if ids is None else self.filter(**{f"{self.tenant_field}__in": ids})


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
        Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="service_accounts"
    )
    # The identity provider's `sub` for a person who logs in through single sign-on (docs/sso.md); empty for
    # local accounts. Log-ins find the person by it, never by a name or an e-mail address the IdP may reuse.
    oidc_subject = models.CharField(max_length=255, blank=True, default="", editable=False)
    # The groups the identity provider sent at this person's last log-in (`last_login`): the group mappings page
    # previews what they would give today.
    idp_groups = models.JSONField(default=list, blank=True, editable=False)
    # A platform admin allowed this local account to be linked to the identity provider: the next single sign-on
    # log-in whose user name claim is this account's name takes it over (docs/sso.md, "Accounts").
    oidc_link_pending = models.BooleanField(default=False, editable=False)

    objects = UserManager()

    class Meta(AbstractUser.Meta):
        swappable = "AUTH_USER_MODEL"
        constraints = [
            models.CheckConstraint(
                condition=Q(is_service_account=False) | Q(owner_tenant__isnull=False),
                name="service_account_has_owner_tenant",
                violation_error_message="A service account must belong to a tenant.",
            ),
            models.UniqueConstraint(
                fields=["oidc_subject"], condition=~Q(oidc_subject=""), name="user_oidc_subject_unique"
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


class MembershipSource(models.TextChoices):
    MANUAL = "manual", "manual"
    IDP = "idp", "identity provider"


class Membership(models.Model):
    """A user's role on one tenant, or a console-wide role (platform-admin, on-call, global viewer)."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    # Where it comes from: granted by hand, or from the person's identity provider groups through a GroupMapping
    # (re-evaluated at every single sign-on log-in; never edited by hand: docs/sso.md).
    source = models.CharField(max_length=10, choices=MembershipSource.choices, default=MembershipSource.MANUAL)
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
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE)
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


class GroupMapping(models.Model):
    """An identity provider group, or a pattern of group names, that gives a role (docs/sso.md).

    `group` is an exact name (`gpu-platform-admins`) with a `role` and, for a tenant role, a `tenant`; or a
    pattern with `{tenant}` (a tenant slug) and optionally `{role}` (`gpu:{tenant}:{role}`), where the tenant
    and the role come from the group's name (`role` is then set only when the pattern has no `{role}`).
    """

    group = models.CharField(max_length=255, unique=True)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    role = models.CharField(max_length=20, choices=Role.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["group"]

    def __str__(self) -> str:
        return self.group

    @property
    def is_pattern(self) -> bool:
        return "{tenant}" in self.group or "{role}" in self.group


class FederatedTrustQuerySet(models.QuerySet):
    def for_user(self, user, action: str) -> FederatedTrustQuerySet:
        """The trusts of the service accounts of the tenants you manage (all of them for platform admins)."""
        from apps.accounts.permissions import allowed_tenant_ids

        ids = allowed_tenant_ids(user, "manage")
        if ids is None:
            return self
        return self.filter(service_account__owner_tenant_id__in=ids)


class FederatedTrust(models.Model):
    """A service account trusts an OIDC issuer's ID tokens whose `aud` and claims match (docs/sso.md, CI pipelines):
    `POST /api/v1/token-exchange/` swaps such a token for a console token of at most `max_minutes`."""

    service_account = models.ForeignKey(User, on_delete=models.CASCADE, related_name="federated_trusts")
    issuer = models.URLField(max_length=500)
    audience = models.CharField(max_length=500)
    conditions = models.JSONField(default=dict, blank=True, help_text="Claim name → exact value (string or boolean).")
    max_minutes = models.PositiveIntegerField(default=15)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = FederatedTrustQuerySet.as_manager()

    class Meta:
        ordering = ["service_account_id", "issuer", "pk"]

    def __str__(self) -> str:
        return f"{self.service_account_id} ← {self.issuer}"
