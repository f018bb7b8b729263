"""Page-number pagination for every list: `?page=2&page_size=100` (bounded by API_MAX_PAGE_SIZE)."""

from django.conf import settings
from rest_framework.pagination import PageNumberPagination


class StandardPagination(PageNumberPagination):
    page_size = settings.API_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = settings.API_MAX_PAGE_SIZE
