"""`manage.py wait_for_migrations`: wait until the database holds every migration of this code, then exit 0.

The init container of every console pod on Kubernetes (deploy/kubernetes/base): the migration Job of a release runs
`migrate` once, and the release's web, worker and beat pods start only once its work is done, so new code never
runs on a schema it does not know. Old pods keep running meanwhile; the expand/contract rule (docs/deploy-kubernetes.md)
keeps the new schema good for them. An unreachable database is waited for too (it may be starting). Exits 1 with what
is still missing when `--timeout` runs out.
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor


def unapplied_migrations(alias: str = DEFAULT_DB_ALIAS) -> list[str]:
    """`app.name` of every migration of this code that the database has not applied, in the order they would run."""
    connection = connections[alias]
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan if not backwards]


class Command(BaseCommand):
    help = "Wait until the database has every migration of this code (the migration Job's work), then exit."
    requires_system_checks = []  # waiting is all it does; the pod's own process runs the checks

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=600.0, help="Seconds to wait at most (default 600).")
        parser.add_argument("--interval", type=float, default=2.0, help="Seconds between checks (default 2).")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="Database alias (default: default).")

    def handle(self, *args, timeout: float, interval: float, database: str, **options):
        deadline = time.monotonic() + timeout
        said = ""
        while True:
            try:
                missing = unapplied_migrations(database)
            except DatabaseError as exc:
                connections[database].close()  # a fresh connection next time: the server may have restarted
                state = f"the database does not answer: {(str(exc).strip().splitlines() or [repr(exc)])[0]}"
            else:
                if not missing:
                    self.stdout.write("Every migration is applied.")
                    return
                state = f"{len(missing)} migration(s) not applied yet, the first {missing[0]}"
            if time.monotonic() >= deadline:
                raise CommandError(f"Gave up after {timeout:g} s: {state}")
            if state != said:
                self.stdout.write(f"Waiting: {state}")
                said = state
            time.sleep(interval)
