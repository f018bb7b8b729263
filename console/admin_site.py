"""Django admin for platform admins only.

The site lives in console/, the top layer, because it decides with the console's roles (apps.accounts),
and apps.core imports no app. The model admins the apps register on it come from apps/core/admin_base.py
(platform-admin permissions, read-only) and apps/audit/admin_base.py (every edit audited).
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig


class ConsoleAdminSite(admin.AdminSite):
    site_header = "GPU console administration"
    site_title = "GPU console admin"

    def has_permission(self, request) -> bool:
        # Imported here: this module is loaded with INSTALLED_APPS, before the models are.
        from apps.accounts.permissions import has_perm

        # Access follows the console's own roles (platform-admin), not Django's is_staff/is_superuser flags.
        return bool(request.user.is_active and has_perm(request.user, "administer"))


class ConsoleAdminConfig(AdminConfig):
    default_site = "console.admin_site.ConsoleAdminSite"
