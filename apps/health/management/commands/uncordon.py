from apps.health.management.runbook_command import RunbookCommand


class Command(RunbookCommand):
    help = "Runbook action: uncordon a node (--reason required; --dry-run shows the impact)."
    action = "uncordon"
