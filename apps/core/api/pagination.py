"""Page-number pagination for every list: `?page=2&page_size=100`.

`page_size` is a whole number from 1; above API_MAX_PAGE_SIZE it is capped (a client asking for "everything"
gets the largest page), while 0, a negative number or not a number is a 400 naming `page_size` (it was
silently the default page size). A page past the end is a 404.
"""

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class StandardPagination(PageNumberPagination):
    page_size = settings.API_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = settings.API_MAX_PAGE_SIZE

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise ValidationError({self.page_size_query_param: [_("A whole number from 1.")]})
        return min(value, self.max_page_size)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"]["minimum"] = 1
                parameter["description"] = _(
                    "Results per page: from 1; above %(max)s it is %(max)s (default %(default)s)."
                ) % {"max": self.max_page_size, "default": self.page_size}
        return parameters
