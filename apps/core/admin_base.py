"""Base classes for the apps' model admins: the admin site decides who may use them, not Django's model perms.

The site (console/admin_site.py) lets in platform admins only; every model admin defers to it, so the
console's roles are asked in one place. Admins that edit and audit each change: apps/audit/admin_base.py.
"""

from __future__ import annotations

from django.contrib import admin


class PlatformAdminPermissions:
    """Model permissions in the admin are the site's (the platform-admin role), not Django's per-model perms."""

    def _site_allows(self, request) -> bool:
        return self.admin_site.has_permission(request)

    def has_module_permission(self, request) -> bool:
        return self._site_allows(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return self._site_allows(request)

    def has_add_permission(self, request, *args) -> bool:
        return self._site_allows(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return self._site_allows(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._site_allows(request)


class ReadOnlyAdmin(PlatformAdminPermissions, admin.ModelAdmin):
    """Visible in the admin but changed only through the console's services (which enforce the rules)."""

    actions = None

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
