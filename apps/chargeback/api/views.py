"""Chargeback API: statements for finance systems (JSON and CSV), periods, rate cards, spend budgets, credits."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from apps.chargeback import services
from apps.chargeback.api.serializers import (
    CreditRequestSerializer,
    CreditSerializer,
    PeriodActionSerializer,
    PeriodSerializer,
    RateCardSerializer,
    SpendBudgetSerializer,
    StatementDetailSerializer,
    StatementSerializer,
)
from apps.chargeback.exports import csv_response
from apps.chargeback.models import Credit, Period, RateCard, SpendBudget, Statement
from apps.core.api.views import ScopedViewSetMixin


class StatementViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Statements of closed periods for the tenants you can see (a tenant admin: their subtree).

    The detail is the full statement (lines and totals, decimals as strings); `.../csv/` is the same as CSV.
    Filter with `?period=2026-11` and `?tenant=<slug>`.
    """

    model = Statement
    serializer_class = StatementSerializer

    def get_queryset(self):
        qs = super().get_queryset().select_related("period", "tenant")
        period = self.request.query_params.get("period")
        if period:
            year, _, month = period.partition("-")
            qs = qs.filter(period__start__year=year, period__start__month=month) if month.isdigit() else qs.none()
        tenant = self.request.query_params.get("tenant")
        if tenant:
            qs = qs.filter(tenant__slug=tenant)
        return qs

    def get_serializer_class(self):
        return StatementDetailSerializer if self.action == "retrieve" else StatementSerializer

    @extend_schema(responses={(200, "text/csv"): str})
    @action(detail=True, methods=["get"])
    def csv(self, request, pk=None):
        return csv_response(self.get_object())


class PeriodViewSet(viewsets.ReadOnlyModelViewSet):
    """Billing periods. Platform admins close a finished one (locks it, writes statements) or reopen it (reason)."""

    queryset = Period.objects.select_related("closed_by")
    serializer_class = PeriodSerializer
    permission_classes = [IsAuthenticated]

    @extend_schema(request=PeriodActionSerializer, responses=PeriodSerializer)
    @action(detail=True, methods=["post"])
    def close(self, request, pk=None):
        body = PeriodActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        period = services.close_period(request.user, self.get_object(), reason=body.validated_data.get("reason", ""))
        return Response(PeriodSerializer(period).data)

    @extend_schema(request=PeriodActionSerializer, responses=PeriodSerializer)
    @action(detail=True, methods=["post"])
    def reopen(self, request, pk=None):
        body = PeriodActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        period = services.reopen_period(request.user, self.get_object(), reason=body.validated_data.get("reason", ""))
        return Response(PeriodSerializer(period).data)


class RateCardViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Rate cards with their history (every row ever set). Platform admins POST a new price from a time on."""

    queryset = RateCard.objects.select_related("gpu_model", "tier", "created_by")
    serializer_class = RateCardSerializer
    permission_classes = [IsAuthenticated]
    filterset_fields = ["gpu_model__code", "tier__name"]

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.set_rate(
            self.request.user,
            gpu_model=data["gpu_model"],
            tier=data.get("tier"),
            rate=data["rate"],
            effective_from=data["effective_from"],
            note=data.get("note", ""),
        )


class SpendBudgetViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Monthly money budgets per tenant (not GPU guarantees: see /budgets/). POST sets one."""

    model = SpendBudget
    serializer_class = SpendBudgetSerializer
    select_related = ("tenant",)

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.set_spend_budget(
            self.request.user,
            tenant=data["tenant"],
            monthly_amount=data["monthly_amount"],
            thresholds=data.get("thresholds"),
            block_preemptible_when_over=data.get("block_preemptible_when_over", False),
            reason=data.get("reason", ""),
        )


class CreditViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """GPU time credited for hardware faults. POST credits the workloads a fault interrupted (admins, on-call)."""

    model = Credit
    serializer_class = CreditSerializer
    select_related = ("tenant", "cluster", "gpu_model", "period")

    @extend_schema(request=CreditRequestSerializer, responses=CreditSerializer(many=True))
    def create(self, request, *args, **kwargs):
        body = CreditRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        credits = services.credit_interruptions(request.user, **body.validated_data)
        return Response(CreditSerializer(credits, many=True).data, status=status.HTTP_201_CREATED)
