"""The list mechanism (apps/core/tables.py + ScopedListView): sort, filter, paginate and CSV, scoped like the page."""

import csv
import io

import pytest
from django.http import QueryDict
from django.urls import reverse

from apps.core.tables import Column, Table
from apps.operations.models import Operation
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db

COLUMNS = [
    Column("id", "#", order_by="id", csv="pk"),
    Column("kind", "Kind", order_by="kind"),
    Column("note", "Note", csv="reason"),
    Column("hidden", "Hidden", csv="target_label", shown=False),
    Column("actions", "Actions", csv=False),
]


def table(query: str, default: str = "-id") -> Table:
    return Table(COLUMNS, QueryDict(query), default)


def test_sort_parsing_and_headers():
    t = table("sort=kind&page=3&status=running")
    assert (t.sort_key, t.descending, t.explicit_sort) == ("kind", False, "kind")
    heads = {h.key: h for h in t.headers}
    assert "hidden" not in heads  # CSV-only columns have no header
    # The sorted column says so and flips on the next click; the others sort ascending; the page is dropped.
    assert heads["kind"].aria_sort == "ascending" and heads["kind"].url == "?sort=-kind&status=running"
    assert heads["id"].aria_sort == "" and heads["id"].url == "?sort=id&status=running"
    assert heads["note"].url == ""  # not sortable: no link
    assert t.csv_url == "?sort=kind&status=running&format=csv"
    t = table("sort=-kind")
    assert {h.key: h for h in t.headers}["kind"].aria_sort == "descending"


def test_unknown_or_unsortable_keys_fall_back_to_the_default():
    for query in ("sort=password", "sort=-note", "sort="):
        t = table(query)
        assert (t.sort_key, t.descending, t.explicit_sort) == ("id", True, "")


def test_csv_cells_are_safe_for_spreadsheets():
    rows = list(Table([Column("reason", "Reason")], QueryDict()).csv_rows([Operation(reason="=HYPERLINK(1)")]))
    assert rows == [["Reason"], ["'=HYPERLINK(1)"]]
    rows = list(Table([Column("progress", "P")], QueryDict()).csv_rows([Operation(progress=-1.5)]))
    assert rows[1] == ["-1.5"]  # a negative number is a number, not a formula


@pytest.fixture
def operations(personas):
    kinds = ["fleet.sync", "health.drain", "health.cordon"]
    ops = [
        Operation(kind=kinds[i % 3], tenant=personas.a, actor=personas.member_a, reason=f"op {i}", status="succeeded")
        for i in range(60)
    ]
    ops.append(Operation(kind="zz.other-tenant", tenant=personas.b, actor=personas.member_b, status="running"))
    return Operation.objects.bulk_create(ops)


def test_list_sorts_by_clickable_headers(operations, personas, client):
    client.force_login(fresh(personas.platform_admin))
    url = reverse("operations:operation_list")
    page = client.get(url, {"sort": "kind"})
    kinds = [op.kind for op in page.context["object_list"]]
    assert kinds == sorted(kinds) and kinds[0] == "fleet.sync"
    body = page.content.decode()
    assert 'aria-sort="ascending" data-col="kind"' in body and 'href="?sort=-kind"' in body
    down = [op.kind for op in client.get(url, {"sort": "-kind"}).context["object_list"]]
    assert down[0] == "zz.other-tenant" and down == sorted(down, reverse=True)
    # The default order is the newest first, and the header says so.
    default = client.get(url)
    assert default.context["object_list"][0].pk == max(op.pk for op in operations)
    assert 'aria-sort="descending" data-col="created"' in default.content.decode()


def test_filter_sort_and_pages_compose(operations, personas, client):
    client.force_login(fresh(personas.platform_admin))
    url = reverse("operations:operation_list")
    first = client.get(url, {"kind": "health", "sort": "id"})
    assert first.context["paginator"].count == 40 and len(first.context["object_list"]) == 40
    assert all(op.kind.startswith("health") for op in first.context["object_list"])
    # The filter form keeps the sort; the pager keeps both.
    body = first.content.decode()
    assert '<input type="hidden" name="sort" value="id">' in body
    page2 = client.get(url, {"sort": "id", "page": 2})
    ids = [op.pk for op in page2.context["object_list"]]
    assert len(ids) == 11 and ids == sorted(ids)
    assert "?sort=id&page=1" in page2.content.decode()  # the pager's link back keeps the sort


def read_csv(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response.streaming and "attachment" in response["Content-Disposition"]
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_csv_exports_the_filtered_sorted_list_across_pages(operations, personas, client):
    client.force_login(fresh(personas.platform_admin))
    url = reverse("operations:operation_list")
    rows = read_csv(client.get(url, {"format": "csv", "sort": "id", "page": 2}))
    header, body = rows[0], rows[1:]
    assert header[:4] == ["#", "Kind", "Target", "Tenant"] and "Reason" in header and "Actions" not in header
    assert len(body) == 61  # every page, not the second one
    assert [int(r[0]) for r in body] == sorted(op.pk for op in operations)
    filtered = read_csv(client.get(url, {"format": "csv", "kind": "health.drain"}))
    assert len(filtered) - 1 == 20 and {r[1] for r in filtered[1:]} == {"health.drain"}


def test_csv_is_scoped_like_the_page(operations, personas, client):
    client.force_login(fresh(personas.member_b))
    url = reverse("operations:operation_list")
    rows = read_csv(client.get(url, {"format": "csv"}))
    assert [r[1] for r in rows[1:]] == ["zz.other-tenant"]
    page = client.get(url)
    assert [op.kind for op in page.context["object_list"]] == ["zz.other-tenant"]
    client.force_login(fresh(personas.member_a))
    rows = read_csv(client.get(url, {"format": "csv"}))
    assert len(rows) - 1 == 60 and "zz.other-tenant" not in {r[1] for r in rows}
    client.logout()
    assert client.get(url, {"format": "csv"}).status_code == 302  # anonymous: the login page, no data


@pytest.mark.parametrize(
    "name",
    [
        "workloads:workload_list",
        "fleet:node_list",
        "health:incident_list",
        "audit:event_list",
        "operations:operation_list",
        "chargeback:statement_list",
        "tenancy:tenant_list",
        "accounts:tokens",
        "accounts:memberships",
        "workloads:template_list",
    ],
)
def test_every_long_list_sorts_and_exports(personas, client, name):
    client.force_login(fresh(personas.platform_admin))
    page = client.get(reverse(name))
    assert page.status_code == 200
    body = page.content.decode()
    assert 'class="sort-link"' in body and 'data-testid="csv-export"' in body
    table = page.context["table"]
    for header in table.headers:
        if header.url:  # every sortable column sorts without error, both ways
            for sort in (header.key, f"-{header.key}"):
                assert client.get(reverse(name), {"sort": sort}).status_code == 200, (name, sort)
    rows = read_csv(client.get(reverse(name), {"format": "csv"}))
    assert rows[0] == [str(c.label) for c in table.columns if c.csv is not False]
