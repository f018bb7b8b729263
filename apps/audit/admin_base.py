"""The model admin for models the admin may edit: each edit writes one audit event, like any other change."""

from __future__ import annotations

from django.contrib import admin
from django.db import transaction

from apps.audit.services import record_event, snapshot
from apps.core.admin_base import PlatformAdminPermissions


class AuditedModelAdmin(PlatformAdminPermissions, admin.ModelAdmin):
    """Admin edits write one audit event each; bulk actions are off so each change is recorded singly."""

    actions = None

    def save_model(self, request, obj, form, change):
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
