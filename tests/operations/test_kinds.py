"""Operation kinds are spelled `<app>.<verb-noun>`; kinds renamed to that spelling keep their old names findable."""

import importlib
import re

from django.apps import apps as django_apps

from apps.operations.models import Operation
from apps.operations.runner import FORMER_KINDS, HANDLERS, execute_operation
from tests.operations import handlers
from tests.utils.personas import fresh

SPELLING = re.compile(r"^[a-z]+\.[a-z]+(-[a-z]+)*$")
# The migration module's name starts with a digit: no import statement can name it.
kind_spelling = importlib.import_module("apps.operations.migrations.0004_kind_spelling")


def test_every_kind_is_app_dot_verb_noun():
    kinds = [kind for kind in HANDLERS if not kind.startswith("test.")]
    assert kinds and [kind for kind in kinds if not SPELLING.match(kind)] == []
    # The app prefix is the app whose handler runs the kind.
    owners = {kind: HANDLERS[kind].__module__.split(".")[1] for kind in kinds}
    assert {kind: owner for kind, owner in owners.items() if kind.split(".")[0] != owner} == {}


def test_renamed_kinds_are_the_ones_the_migration_rewrites():
    renamed = {old: new for old, new in FORMER_KINDS.items() if not new.startswith("test.")}
    assert (
        kind_spelling.RENAMED
        == renamed
        == {
            "fleet.quota_push": "tenancy.quota-push",
            "fleet.quota_drift": "tenancy.quota-drift",
        }
    )


def test_migration_rewrites_stored_kinds_and_back(personas):
    push = Operation.objects.create(kind="fleet.quota_push", tenant=personas.a)
    drift = Operation.objects.create(kind="fleet.quota_drift", tenant=personas.a)
    sync = Operation.objects.create(kind="fleet.sync", tenant=personas.a)
    kind_spelling.forwards(django_apps, None)
    kinds = [o.kind for o in Operation.objects.order_by("pk")]
    assert kinds == ["tenancy.quota-push", "tenancy.quota-drift", "fleet.sync"]
    kind_spelling.backwards(django_apps, None)
    assert {o.pk: o.kind for o in Operation.objects.all()} == {
        push.pk: "fleet.quota_push",
        drift.pk: "fleet.quota_drift",
        sync.pk: "fleet.sync",
    }


def test_kind_filter_finds_renamed_kinds_by_their_old_names(personas, api):
    push = Operation.objects.create(kind="tenancy.quota-push", tenant=personas.a)
    drift = Operation.objects.create(kind="tenancy.quota-drift", tenant=personas.a)
    sync = Operation.objects.create(kind="fleet.sync", tenant=personas.a)
    drain = Operation.objects.create(kind="health.drain", tenant=personas.a)
    client = api(fresh(personas.oncall))

    def ids(kind):
        return {r["id"] for r in client.get("/api/v1/operations/", {"kind": kind}).json()["results"]}

    assert ids("tenancy.quota") == {push.pk, drift.pk}
    assert ids("fleet.quota_push") == {push.pk}
    assert ids("Fleet.Quota") == {push.pk, drift.pk}
    assert ids("fleet.") == {push.pk, drift.pk, sync.pk}  # what "fleet." found before the rename
    assert ids("health") == {drain.pk}


def test_a_row_under_an_old_spelling_still_runs(personas):
    """Written by a process older than the rename, after the migration ran: the handler runs all the same."""
    handlers.CALLS.clear()
    op = Operation.objects.create(kind="test.old_name")
    execute_operation(op.pk)
    op.refresh_from_db()
    assert op.status == "succeeded" and op.result == {"kind": "test.renamed"} and [op.pk] == handlers.CALLS
