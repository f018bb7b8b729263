"""Base views for HTML pages: lists start from `for_user`, are filtered by the model's FilterSet, sorted by the
view's columns (apps/core/tables.py), paginated, exported as CSV and refreshed in place by htmx."""

from __future__ import annotations

from django.contrib.auth.mixins import LoginRequiredMixin
from django.utils.cache import patch_vary_headers
from django_filters.views import FilterView

from apps.core.tables import Column, Table, wants_csv


def is_htmx(request) -> bool:
    """An htmx request (a polling partial) rather than a page load."""
    return request.headers.get("HX-Request") == "true"


def vary_on_htmx(response):
    """The page and its partial share one URL: caches and the back button must keep them apart."""
    patch_vary_headers(response, ["HX-Request"])
    return response


class ScopedListView(LoginRequiredMixin, FilterView):
    """A paginated, filterable, sortable list of what the user may view, narrowed to the switcher's tenant when one
    is chosen.

    `columns` (apps.core.tables.Column) drive the sortable header and the CSV export (`?format=csv`: every row of
    the filtered list, scoped like the page). With `partial_template_name`, an htmx request gets only the table
    (the page polls it while `is_live(rows)` says something on it can still change).
    """

    paginate_by = 50
    select_related: tuple[str, ...] = ()
    tenant_field: str | None = "tenant"
    strict = False
    columns: list[Column] = []
    default_sort = ""
    csv_name = ""
    partial_template_name = ""
    poll_seconds = 10

    def narrowed_tenant(self):
        """The switcher's tenant when it narrows this list: the view has a tenant field and no tenant filter is set.

        The filter form always submits `tenant=` (empty when unused), so only a non-empty value overrides.
        """
        tenant = getattr(self.request, "current_tenant", None)
        if tenant and self.tenant_field and not self.request.GET.get(self.tenant_field):
            return tenant
        return None

    @property
    def table(self) -> Table:
        if not hasattr(self, "_table"):
            self._table = Table(self.columns, self.request.GET, self.default_sort)
        return self._table

    def get_queryset(self):
        qs = self.model.objects.for_user(self.request.user, "view")
        if self.select_related:
            qs = qs.select_related(*self.select_related)
        tenant = self.narrowed_tenant()
        if tenant is not None:
            qs = qs.filter(**{self.tenant_field: tenant})
        return self.table.order(qs)

    def get(self, request, *args, **kwargs):
        if wants_csv(request) and self.columns:
            self.filterset = self.get_filterset(self.get_filterset_class())
            if self.filterset.is_bound and not self.filterset.is_valid() and self.get_strict():
                rows = self.filterset.queryset.none()
            else:
                rows = self.filterset.qs
            return self.table.csv_response(rows, self.csv_name or self.model._meta.verbose_name_plural)
        return vary_on_htmx(super().get(request, *args, **kwargs))

    def get_template_names(self):
        if self.partial_template_name and is_htmx(self.request):
            return [self.partial_template_name]
        return super().get_template_names()

    def is_live(self, rows) -> bool:
        """Whether the page should keep polling: something shown can still change. Lists override it."""
        return False

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        query = self.request.GET.copy()
        query.pop("page", None)
        context["query_without_page"] = query.urlencode()
        context["narrowed_tenant"] = self.narrowed_tenant()
        if self.columns:
            context["table"] = self.table
        context["filtered"] = any(v for k, v in self.request.GET.items() if k not in {"page", "sort", "format"})
        if self.partial_template_name:
            # Evaluate the page's own queryset: the template iterates the same object and reuses its cache.
            rows = context.get("object_list")
            context["live"] = self.is_live(list(rows) if rows is not None else [])
            context["poll_seconds"] = self.poll_seconds
        return context
