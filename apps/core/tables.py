"""Sortable, exportable tables for the HTML lists: one declaration of columns serves the header, the order and CSV.

A list view declares its columns once:

    columns = [
        Column("name", _("Name"), order_by="name", csv="name"),
        Column("tenant", _("Tenant"), order_by="tenant__slug", csv="tenant.slug"),
        Column("why", _("Why"), csv="state_reason"),            # shown and exported, not sortable
    ]
    default_sort = "-created"

`?sort=name` / `?sort=-name` orders the list (unknown keys fall back to the default: no error, nothing leaks),
`?format=csv` streams the filtered list (every page, the same rows the user may see) as CSV.
`core/_table_head.html` renders the header with links and `aria-sort`; `core/_table_tools.html` the export link.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.http import QueryDict, StreamingHttpResponse
from django.utils import timezone
from django.utils.text import slugify

SORT_PARAM = "sort"
FORMAT_PARAM = "format"
CSV_CHUNK = 2000
# A cell a spreadsheet would run as a formula (CSV injection): such cells are written with a leading quote.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Column:
    """One column: its URL key, header label, how it sorts (ORM fields; empty: not sortable), how it exports."""

    key: str
    label: Any
    order_by: str | tuple[Any, ...] = ()  # field names ("-x" reverses) or query expressions
    # An attribute path ("tenant.slug"; None: the key) or a function of the row; False: not exported.
    csv: str | Callable[[Any], Any] | bool | None = None
    css: str = ""  # classes of the header cell (text-end for numbers)
    shown: bool = True  # False: only in the CSV export (a detail the page folds into another column)

    @property
    def sortable(self) -> bool:
        return bool(self.order_by)

    def ordering(self, descending: bool) -> list[Any]:
        fields = (self.order_by,) if isinstance(self.order_by, str) else self.order_by
        out = []
        for f in fields:
            if isinstance(f, str):
                out.append(_flip(f) if descending else f)
            else:  # an expression: nulls last either way, so empty values never lead a sorted list
                out.append(f.desc(nulls_last=True) if descending else f.asc(nulls_last=True))
        return out

    def value(self, row: Any) -> Any:
        if callable(self.csv):
            return self.csv(row)
        value: Any = row
        path = self.csv if isinstance(self.csv, str) else self.key
        for part in path.split("."):
            value = getattr(value, part, None) if value is not None else None
            if callable(value) and not hasattr(value, "all"):  # get_FOO_display, properties stay values
                value = value()
        return value


def _flip(field: str) -> str:
    return field[1:] if field.startswith("-") else f"-{field}"


@dataclass
class Header:
    label: Any
    css: str
    url: str = ""
    aria_sort: str = ""  # "ascending" / "descending" on the column the list is sorted by
    key: str = ""


class Table:
    """The columns of one list and the request's sort: orders querysets, renders headers, exports CSV."""

    def __init__(self, columns: Iterable[Column], query: QueryDict, default_sort: str = ""):
        self.columns = list(columns)
        self.by_key = {c.key: c for c in self.columns}
        self.query = query
        self.default_sort = default_sort
        self.sort_key, self.descending = (
            self._parse(query.get(SORT_PARAM, "")) or self._parse(default_sort) or ("", False)
        )

    def _parse(self, value: str) -> tuple[str, bool] | None:
        descending = value.startswith("-")
        key = value.lstrip("-")
        column = self.by_key.get(key)
        if column is None or not column.sortable:
            return None
        return key, descending

    @property
    def sort(self) -> str:
        """The sort in force as a URL value (`-created`), or '' when the model's own order applies."""
        if not self.sort_key:
            return ""
        return f"-{self.sort_key}" if self.descending else self.sort_key

    @property
    def explicit_sort(self) -> str:
        """The sort the URL asked for (kept by the filter form), '' when the default applies."""
        parsed = self._parse(self.query.get(SORT_PARAM, ""))
        return self.sort if parsed else ""

    def order(self, queryset):
        """The queryset in the requested order, with the primary key as tie-breaker so pages never overlap."""
        if not self.sort_key:
            return queryset
        fields = self.by_key[self.sort_key].ordering(self.descending)
        tie = "-pk" if self.descending else "pk"
        return queryset.order_by(*fields, tie)

    def _url(self, **changes: str) -> str:
        query = self.query.copy()
        query.pop("page", None)
        for key, value in changes.items():
            if value:
                query[key] = value
            else:
                query.pop(key, None)
        encoded = query.urlencode()
        return f"?{encoded}" if encoded else "?"

    @property
    def headers(self) -> list[Header]:
        headers = []
        for column in self.columns:
            if not column.shown:
                continue
            header = Header(label=column.label, css=column.css, key=column.key)
            if column.sortable:
                current = column.key == self.sort_key
                # A click on the sorted column flips it; on another column sorts ascending.
                next_sort = column.key if (not current or self.descending) else f"-{column.key}"
                header.url = self._url(**{SORT_PARAM: next_sort})
                if current:
                    header.aria_sort = "descending" if self.descending else "ascending"
            headers.append(header)
        return headers

    @property
    def csv_url(self) -> str:
        return self._url(**{FORMAT_PARAM: "csv"})

    # CSV

    def csv_rows(self, rows: Iterable[Any]) -> Iterator[list[str]]:
        exported = [c for c in self.columns if c.csv is not False]
        yield [str(c.label) for c in exported]
        for row in rows:
            yield [_cell(c.value(row)) for c in exported]

    def csv_response(self, queryset, name: str) -> StreamingHttpResponse:
        """Stream every row of `queryset` (already scoped and filtered) as CSV, in the table's order."""
        writer = csv.writer(_Echo(), lineterminator="\n")
        rows = queryset.iterator(chunk_size=CSV_CHUNK) if hasattr(queryset, "iterator") else queryset
        response = StreamingHttpResponse(
            (writer.writerow(line) for line in self.csv_rows(rows)), content_type="text/csv; charset=utf-8"
        )
        stamp = timezone.now().strftime("%Y%m%d-%H%M")
        response["Content-Disposition"] = f'attachment; filename="{slugify(name) or "export"}-{stamp}.csv"'
        return response


class _Echo:
    """A file-like object whose write returns the line, so csv.writer can feed a streaming response."""

    def write(self, value: str) -> str:
        return value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, list | tuple):
        value = ", ".join(str(v) for v in value)
    text = str(value)
    if text.startswith(_FORMULA_START) and not _is_number(text):
        return "'" + text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def wants_csv(request) -> bool:
    return request.GET.get(FORMAT_PARAM) == "csv"
