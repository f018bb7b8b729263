# Every API token expires (API_TOKEN_MAX_LIFETIME_DAYS, issue 20). Tokens issued before that, without an
# expiry, get the full maximum lifetime counted from this migration: no pipeline breaks on the upgrade, and
# each such token has to be rotated within that lifetime.

from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone


def give_every_token_an_expiry(apps, schema_editor):
    ApiToken = apps.get_model("accounts", "ApiToken")
    expires_at = timezone.now() + timedelta(days=settings.API_TOKEN_MAX_LIFETIME_DAYS)
    ApiToken.objects.using(schema_editor.connection.alias).filter(expires_at__isnull=True).update(
        expires_at=expires_at
    )


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_tenant")]

    operations = [migrations.RunPython(give_every_token_an_expiry, migrations.RunPython.noop)]
