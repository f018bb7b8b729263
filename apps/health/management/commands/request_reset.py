from apps.health.management.runbook_command import RunbookCommand


class Command(RunbookCommand):
    help = "Runbook action: request-reset a node (--reason required; --dry-run shows the impact)."
    action = "request-reset"
