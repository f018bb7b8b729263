from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from apps.accounts.models import ApiToken, Membership, Tenant, User
from apps.audit.admin_base import AuditedModelAdmin
from apps.core.admin_base import ReadOnlyAdmin


@admin.register(Tenant)
class TenantAdmin(ReadOnlyAdmin):
    """Tenants are edited on the Tenants page: moving one re-roots its subtree, which the service does."""

    list_display = ["name", "slug", "parent", "path", "created_at"]
    search_fields = ["name", "slug"]


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    can_delete = False
    readonly_fields = ["tenant", "role", "source", "created_at"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # roles are granted on the Memberships page, which checks who may grant what


@admin.register(User)
class UserAdmin(AuditedModelAdmin, BaseUserAdmin):
    """People are created here (or by SSO later); roles are granted on the console's Memberships page."""

    list_display = ["username", "email", "is_service_account", "owner_tenant", "is_active", "last_login"]
    list_filter = ["is_service_account", "is_active", "is_staff"]
    inlines = [MembershipInline]
    # Console roles are memberships, granted on the Memberships page with its checks; Django's own
    # superuser/staff flags and per-model permissions play no part in the console and are not editable.
    readonly_fields = ["is_service_account", "owner_tenant", "is_staff", "is_superuser", "last_login", "date_joined"]
    fieldsets = (
        (None, {"fields": ("username", "password")}),
        ("Personal info", {"fields": ("first_name", "last_name", "email")}),
        ("Status", {"fields": ("is_active", "is_service_account", "owner_tenant", "is_staff", "is_superuser")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__username", "tenant__slug"]


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "prefix",
        "user",
        "tenant",
        "role",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    list_filter = ["role"]
    search_fields = ["name", "prefix", "user__username"]
    exclude = ["digest"]
