"""The shared shape of the runbook commands (cordon, uncordon, drain, resume, request_reset, mark_rma).

    python manage.py drain gpu-0007 --cluster sim-a --reason "XID 79, reboot" --dry-run
    python manage.py drain gpu-0007 --cluster sim-a --reason "XID 79, reboot" --user dave

The command runs the operation synchronously and prints its log. Without --user it acts as the system
(audited as "system"), like the other management commands; with --user it is that user's action and
their role is checked.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import User
from apps.core.errors import ServiceError
from apps.fleet.models import Node


def describe(impact) -> list[str]:
    lines = [f"{impact.action} {impact.cluster}/{impact.node}:"]
    if impact.evicted:
        lines.append(f"  would evict {len(impact.evicted)} workload(s):")
        lines += [
            f"    {w['tenant']}/{w['name']} ({w['kind']}, {w['tier']}, {w['gpus']:g} GPUs)" for w in impact.evicted
        ]
    else:
        lines.append("  evicts nothing")
    for row in impact.tenants_below_guarantee:
        lines.append(
            f"  {row['tenant']}/{row['queue']} below its guarantee of {row['guaranteed']} {row['gpu_model']}: "
            f"{row['running_now']:g} running now, {row['running_after']:g} after"
        )
    for row in impact.capacity_left:
        lines.append(f"  {row['gpu_model']}: {row['free_now']} free now, {row['free_after']} after")
    lines += [f"  warning: {text}" for text in impact.warnings]
    return lines


class RunbookCommand(BaseCommand):
    action = ""

    def add_arguments(self, parser):
        parser.add_argument("node", help="node name")
        parser.add_argument("--cluster", help="cluster name (needed when two clusters have a node of that name)")
        parser.add_argument("--reason", default="", help="why (required)")
        parser.add_argument("--dry-run", action="store_true", help="show the impact only")
        parser.add_argument("--user", help="act as this user (their role is checked); default: the system")

    def handle(self, *args, **opts):
        from apps.health.services.runbook import impact, node_action
        from apps.operations.models import Operation
        from apps.operations.runner import execute_operation

        if not opts["reason"].strip():
            raise CommandError("--reason is required: say why, it goes into the audit log and the backend")
        nodes = Node.objects.select_related("cluster", "gpu_model").filter(name=opts["node"])
        if opts["cluster"]:
            nodes = nodes.filter(cluster__name=opts["cluster"])
        found = list(nodes[:2])
        if not found:
            raise CommandError(f"No node {opts['node']!r}{' in ' + opts['cluster'] if opts['cluster'] else ''}.")
        if len(found) > 1:
            raise CommandError(f"Several clusters have a node {opts['node']!r}; name one with --cluster.")
        node = found[0]
        actor = None
        if opts["user"]:
            actor = User.objects.filter(username=opts["user"]).first()
            if actor is None:
                raise CommandError(f"No user {opts['user']!r}.")
        try:
            preview = impact(actor, node, self.action)
            self.stdout.write("\n".join(describe(preview)))
            if opts["dry_run"]:
                self.stdout.write("dry run: nothing changed")
                return
            operation = node_action(actor, node, self.action, reason=opts["reason"])
        except ServiceError as exc:
            details = "".join(f"\n  {field}: {' '.join(messages)}" for field, messages in exc.fields.items())
            raise CommandError(exc.message + details) from exc
        execute_operation(operation.pk)  # synchronous; a worker that also got the task finds it claimed
        operation = Operation.objects.get(pk=operation.pk)
        self.stdout.write(operation.log.rstrip())
        self.stdout.write(f"operation #{operation.pk} {operation.kind}: {operation.status}")
        if operation.status != "succeeded":
            raise CommandError(operation.error or f"operation #{operation.pk} {operation.status}")
