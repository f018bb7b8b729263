"""A bare DRF endpoint doing one INSERT, for the submission benchmark's side-by-side baseline.

Mounted only when BENCH_BARE_ENDPOINT=1 (bench/submit_bench.py sets it for its own server).
"""

from rest_framework.response import Response
from rest_framework.views import APIView

from apps.audit.models import AuditEvent


class BareInsertView(APIView):
    """Authenticate, insert one row, answer 201: the floor under any real submission."""

    def post(self, request):
        from django.utils import timezone

        event = AuditEvent.objects.create(
            time=timezone.now(), actor_label="bench", action="bench.insert", target_type="bench"
        )
        return Response({"id": event.pk}, status=201)
