"""Django admin for platform admins only, with every admin edit audited like any other change."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.db import transaction


class ConsoleAdminSite(admin.AdminSite):
    site_header = "GPU console administration"
    site_title = "GPU console admin"

    def has_permission(self, request) -> bool:
        from apps.accounts.permissions import has_perm

        # Access follows the console's own roles (platform-admin), not Django's is_staff/is_superuser flags.
        return bool(request.user.is_active and has_perm(request.user, "administer"))


def _is_platform_admin(request) -> bool:
    from apps.accounts.permissions import has_perm

    return has_perm(request.user, "administer")


class PlatformAdminPermissions:
    """Model permissions in the admin come from the platform-admin role, not Django's per-model perms."""

    def has_module_permission(self, request) -> bool:
        return _is_platform_admin(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return _is_platform_admin(request)

    def has_add_permission(self, request, *args) -> bool:
        return _is_platform_admin(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return _is_platform_admin(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return _is_platform_admin(request)


class ConsoleAdminConfig(AdminConfig):
    default_site = "apps.core.admin_site.ConsoleAdminSite"


class AuditedModelAdmin(PlatformAdminPermissions, admin.ModelAdmin):
    """Admin edits write one audit event each; bulk actions are off so each change is recorded singly."""

    actions = None

    def save_model(self, request, obj, form, change):
        from apps.audit.services import record_event, snapshot

        before = snapshot(type(obj).objects.get(pk=obj.pk)) if change else None
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            verb = "change" if change else "create"
            record_event(
                request.user,
                f"admin.{obj._meta.label_lower}.{verb}",
                obj,
                tenant=self.tenant_of(obj),
                before=before,
                after=snapshot(obj),
            )

    def delete_model(self, request, obj):
        from apps.audit.services import record_event, snapshot

        with transaction.atomic():
            record_event(
                request.user,
                f"admin.{obj._meta.label_lower}.delete",
                obj,
                tenant=self.tenant_of(obj),
                before=snapshot(obj),
            )
            super().delete_model(request, obj)

    def save_formset(self, request, form, formset, change):
        """Inline rows are changes too: one event per added, changed or deleted row."""
        from apps.audit.services import record_event, snapshot

        instances = formset.save(commit=False)
        for obj in formset.deleted_objects:
            record_event(
                request.user,
                f"admin.{obj._meta.label_lower}.delete",
                obj,
                tenant=self.tenant_of(obj),
                before=snapshot(obj),
            )
            obj.delete()
        for obj in instances:
            adding = obj._state.adding
            before = None if adding else snapshot(type(obj).objects.get(pk=obj.pk))
            obj.save()
            record_event(
                request.user,
                f"admin.{obj._meta.label_lower}.{'create' if adding else 'change'}",
                obj,
                tenant=self.tenant_of(obj),
                before=before,
                after=snapshot(obj),
            )
        formset.save_m2m()

    def tenant_of(self, obj):
        return getattr(obj, "tenant", None) if hasattr(obj, "tenant_id") else None


class ReadOnlyAdmin(PlatformAdminPermissions, admin.ModelAdmin):
    """Visible in the admin but changed only through the console's services (which enforce the rules)."""

    actions = None

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
