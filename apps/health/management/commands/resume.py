from apps.health.management.runbook_command import RunbookCommand


class Command(RunbookCommand):
    help = "Runbook action: resume a node (--reason required; --dry-run shows the impact)."
    action = "resume"
