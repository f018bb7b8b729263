"""A URL conf with the project's routes plus endpoints that skip their permission checks, as a careless change
might add them: the proof (tests/routes/test_matrix_catches.py) that the route matrix fails on such a change.
Never mounted outside that test."""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.tenancy.models import Queue
from console.urls import urlpatterns as project_urlpatterns


class _QueueOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()


class _DescribeIn(serializers.Serializer):
    description = serializers.CharField()


class EveryQueue(APIView):
    """Lists every tenant's queues: no `for_user` scope."""

    @extend_schema(responses=_QueueOut(many=True))
    def get(self, request):
        return Response(_QueueOut(Queue.objects.order_by("pk"), many=True).data)


class AnyQueue(APIView):
    """Any queue by id: no view check (another tenant's answers 200, not 404)."""

    @extend_schema(responses=_QueueOut)
    def get(self, request, pk):
        return Response(_QueueOut(Queue.objects.get(pk=pk)).data)


class DescribeQueue(APIView):
    """Changes any queue: no `manage` check, no service, no audit event."""

    @extend_schema(request=_DescribeIn, responses=_QueueOut)
    def post(self, request, pk):
        Queue.objects.filter(pk=pk).update(description=request.data.get("description", ""))
        return Response(_QueueOut(Queue.objects.get(pk=pk)).data)


def queue_page(request, pk):
    """A page with neither a login nor a view check."""
    queue = Queue.objects.select_related("tenant").get(pk=pk)
    return HttpResponse(f"<h1>{queue.tenant.name} / {queue.name}</h1>")


urlpatterns = [
    path("api/v1/rt-unprotected/queues/", EveryQueue.as_view()),
    path("api/v1/rt-unprotected/queues/<int:pk>/", AnyQueue.as_view()),
    path("api/v1/rt-unprotected/queues/<int:pk>/describe/", DescribeQueue.as_view()),
    path("rt-unprotected/queues/<int:pk>/", queue_page, name="rt_unprotected_queue"),
    *project_urlpatterns,
]
