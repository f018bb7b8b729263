"""Version 1 of the health rules (the defaults in apps/health/rules.py at install time) and the default
isolation policy, so that reading pages never has to write them."""

from django.db import migrations

DEFAULT_CORDON = ["critical", "fatal"]


def seed(apps, schema_editor):
    from apps.health.rules import DEFAULT_RULES

    RuleSet = apps.get_model("health", "RuleSet")
    Rule = apps.get_model("health", "Rule")
    IsolationPolicy = apps.get_model("health", "IsolationPolicy")
    if not RuleSet.objects.exists():
        ruleset = RuleSet.objects.create(version=1, note="default rules")
        Rule.objects.bulk_create(
            Rule(
                ruleset=ruleset,
                key=r.key,
                cause=r.cause,
                title=r.title,
                kind=r.kind,
                params=r.params,
                severity=r.severity,
                action=r.action,
                enabled=r.enabled,
            )
            for r in DEFAULT_RULES
        )
    if not IsolationPolicy.objects.filter(pool__isnull=True).exists():
        IsolationPolicy.objects.create(pool=None, cordon_severities=DEFAULT_CORDON)


class Migration(migrations.Migration):
    dependencies = [("health", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
