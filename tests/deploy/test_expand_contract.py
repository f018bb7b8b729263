"""Upgrades without downtime: every migration since the last release keeps the expand/contract rule
(tests/deploy/expand_contract.py, docs/deploy-kubernetes.md), and the rule catches each kind of breaking change."""

from __future__ import annotations

import pytest
from django.db import migrations, models
from django.db.migrations.loader import MigrationLoader

from tests.deploy.conftest import ROOT
from tests.deploy.expand_contract import migration_problems, operation_problems

RELEASED = ROOT / "deploy" / "released-migrations.txt"


@pytest.fixture(scope="module")
def loader() -> MigrationLoader:
    return MigrationLoader(None, ignore_no_migrations=True)  # from the files; no database needed


def released() -> list[tuple[str, str]]:
    lines = [line.strip() for line in RELEASED.read_text().splitlines()]
    return [tuple(line.split(".", 1)) for line in lines if line and not line.startswith("#")]


def project_migrations(loader: MigrationLoader) -> set[tuple[str, str]]:
    return {key for key, m in loader.graph.nodes.items() if type(m).__module__.startswith("apps.")}


def test_the_released_list_names_existing_migrations(loader):
    listed = released()
    assert len(listed) == len(set(listed))
    assert not set(listed) - project_migrations(loader), "deploy/released-migrations.txt names unknown migrations"
    # A released migration is never edited away: the running release may have applied it.
    for app in {app for app, _ in listed}:
        assert (app, "0001_initial") in listed


def test_migrations_since_the_release_keep_the_previous_release_working(loader):
    new = sorted(project_migrations(loader) - set(released()))
    problems = [p for key in new for p in migration_problems(loader, key)]
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def state(loader):
    """The schema of the last migration of `operations`, with its SchedulerLease and Operation."""
    (leaf,) = [key for key in loader.graph.leaf_nodes() if key[0] == "operations"]
    return loader.project_state(leaf)


BREAKING = {
    "drop a column": migrations.RemoveField("operation", "reason"),
    "drop a table": migrations.DeleteModel("SchedulerLease"),
    "rename a column": migrations.RenameField("operation", "reason", "why"),
    "rename a table": migrations.RenameModel("SchedulerLease", "BeatLease"),
    "move a table": migrations.AlterModelTable("schedulerlease", "beat_lease"),
    "shorten a field": migrations.AlterField("schedulerlease", "holder", models.CharField(max_length=50, blank=True)),
    "forbid NULL": migrations.AlterField("operation", "started_at", models.DateTimeField()),
    "change a type": migrations.AlterField("operation", "reason", models.IntegerField(default=0)),
    "make unique": migrations.AlterField("operation", "kind", models.CharField(max_length=100, unique=True)),
    "rename via db_column": migrations.AlterField("operation", "reason", models.TextField(blank=True, db_column="why")),
    "NOT NULL without db_default": migrations.AddField("operation", "weight", models.IntegerField(default=1)),
    "SQL drop": migrations.RunSQL("ALTER TABLE operations_operation DROP COLUMN reason", reverse_sql=""),
    "SQL rename": migrations.RunSQL(["ALTER TABLE operations_operation RENAME COLUMN reason TO why"]),
}
KEEPING = {
    "a nullable column": migrations.AddField("operation", "note", models.TextField(null=True)),
    "NOT NULL with db_default": migrations.AddField("operation", "weight", models.IntegerField(db_default=1)),
    "a new table": migrations.CreateModel("Extra", [("id", models.BigAutoField(primary_key=True))]),
    "a longer field": migrations.AlterField("schedulerlease", "holder", models.CharField(max_length=300, blank=True)),
    "a wider type": migrations.AlterField("operation", "attempts", models.PositiveBigIntegerField(default=0)),
    "allow NULL": migrations.AlterField("operation", "progress", models.FloatField(default=0.0, null=True)),
    "an index": migrations.AddIndex("operation", models.Index(fields=["reason"], name="op_reason_idx")),
    "SQL that creates": migrations.RunSQL("CREATE INDEX x ON operations_operation (reason)", "DROP INDEX x"),
}


@pytest.mark.parametrize("name", BREAKING)
def test_the_rule_refuses_a_breaking_change(state, name):
    assert operation_problems("operations", BREAKING[name], state.clone())


@pytest.mark.parametrize("name", KEEPING)
def test_the_rule_lets_an_expansion_through(state, name):
    assert operation_problems("operations", KEEPING[name], state.clone()) == []


def test_a_declared_contract_migration_passes(loader, monkeypatch):
    key = ("operations", "0005_scheduler_lease")
    migration = loader.graph.nodes[key]
    monkeypatch.setattr(migration, "operations", [BREAKING["drop a column"]])
    assert migration_problems(loader, key)
    monkeypatch.setattr(
        migration, "contract", "drops Operation.reason: unused since the previous release", raising=False
    )
    assert migration_problems(loader, key) == []
