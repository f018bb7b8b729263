from apps.core.api.views import ScopedReadOnlyViewSet
from apps.operations.api.serializers import OperationSerializer
from apps.operations.filtersets import OperationFilterSet
from apps.operations.models import Operation


class OperationViewSet(ScopedReadOnlyViewSet):
    """Long operations with their status, progress, log and error. Started by the services that need them."""

    model = Operation
    serializer_class = OperationSerializer
    filterset_class = OperationFilterSet
    select_related = ("actor", "tenant")
    ordering_fields = ["created_at", "finished_at"]
