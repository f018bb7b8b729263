from django.contrib import admin
from django_celery_beat import admin as beat_admin
from django_celery_beat import models as beat_models

from apps.audit.admin_base import AuditedModelAdmin
from apps.core.admin_base import ReadOnlyAdmin
from apps.operations.models import Operation


@admin.register(Operation)
class OperationAdmin(ReadOnlyAdmin):
    list_display = ["id", "kind", "status", "progress", "target_label", "tenant", "actor", "created_at"]
    list_filter = ["status", "kind"]


# Periodic tasks (django-celery-beat) are platform configuration: edits are audited like any other
# change, and its bulk actions (enable/disable/run many at once) are off because they bypass that.
def _audited(model, base):
    admin.site.unregister(model)
    admin.site.register(model, type(f"Audited{base.__name__}", (AuditedModelAdmin, base), {"actions": None}))


for _model, _base in [
    (beat_models.PeriodicTask, beat_admin.PeriodicTaskAdmin),
    (beat_models.IntervalSchedule, beat_admin.IntervalScheduleAdmin),
    (beat_models.CrontabSchedule, beat_admin.CrontabScheduleAdmin),
    (beat_models.SolarSchedule, beat_admin.SolarScheduleAdmin),
    (beat_models.ClockedSchedule, beat_admin.ClockedScheduleAdmin),
]:
    _audited(_model, _base)
