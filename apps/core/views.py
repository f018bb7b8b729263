"""Base views for HTML pages: lists start from `for_user`, are filtered by the model's FilterSet and paginated."""

from __future__ import annotations

from django.contrib.auth.mixins import LoginRequiredMixin
from django_filters.views import FilterView


class ScopedListView(LoginRequiredMixin, FilterView):
    """A paginated, filterable list of what the user may view, narrowed to the switcher's tenant when one is chosen."""

    paginate_by = 50
    select_related: tuple[str, ...] = ()
    tenant_field: str | None = "tenant"
    strict = False

    def narrowed_tenant(self):
        """The switcher's tenant when it narrows this list: the view has a tenant field and no tenant filter is set.

        The filter form always submits `tenant=` (empty when unused), so only a non-empty value overrides.
        """
        tenant = getattr(self.request, "current_tenant", None)
        if tenant and self.tenant_field and not self.request.GET.get(self.tenant_field):
            return tenant
        return None

    def get_queryset(self):
        qs = self.model.objects.for_user(self.request.user, "view")
        if self.select_related:
            qs = qs.select_related(*self.select_related)
        tenant = self.narrowed_tenant()
        if tenant is not None:
            qs = qs.filter(**{self.tenant_field: tenant})
        return qs

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        query = self.request.GET.copy()
        query.pop("page", None)
        context["query_without_page"] = query.urlencode()
        context["narrowed_tenant"] = self.narrowed_tenant()
        return context
