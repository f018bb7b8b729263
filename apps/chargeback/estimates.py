"""What a workload would cost, before it is submitted: the submit page's cost preview (apps/workloads/panels.py).

Priced as its usage will be (apps/chargeback/metering.py, statements.py): GPU-hours of its exact share (a 1/7 MIG
slice is 1/7 of a GPU) times the rate card in force now for its GPU model and tier (the tier's own card, else the
model's default card: `RateBook.card_for`), rounded to the cent as statements are. Per hour of running, and for its
runtime limit (max_runtime_s), which is what it costs at most if it runs to the limit without a fault credit.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from apps.backends.shares import format_share
from apps.chargeback.models import SECONDS_PER_HOUR, RateCard
from apps.chargeback.rates import RateBook
from apps.chargeback.statements import money

COST_TITLE = gettext_noop("Cost")


@dataclass
class CostEstimate:
    gpus: Fraction  # the exact share it holds while it runs
    card: RateCard | None  # None: no rate for its model yet (it is metered all the same, priced at 0)
    runtime_s: int | None  # its runtime limit; None: runs until cancelled (a service)

    @property
    def gpus_shown(self) -> str:
        return format_share(self.gpus)

    @property
    def rate(self) -> Decimal | None:
        return self.card.rate if self.card else None

    @property
    def currency(self) -> str:
        return self.card.currency if self.card else ""

    def _priced(self, seconds: int) -> Decimal:
        gpu_seconds = Decimal(self.gpus.numerator) * seconds / self.gpus.denominator
        return money(gpu_seconds * self.card.rate / SECONDS_PER_HOUR) if self.card else Decimal("0.00")

    @property
    def gpu_hours_per_hour(self) -> Decimal:
        return (Decimal(self.gpus.numerator) / self.gpus.denominator).quantize(Decimal("0.01"))

    @property
    def per_hour(self) -> Decimal:
        return self._priced(3600)

    @property
    def per_day(self) -> Decimal:
        return self._priced(86_400)

    @property
    def runtime_gpu_hours(self) -> Decimal | None:
        if self.runtime_s is None:
            return None
        return (Decimal(self.gpus.numerator) * self.runtime_s / self.gpus.denominator / SECONDS_PER_HOUR).quantize(
            Decimal("0.01")
        )

    @property
    def for_runtime(self) -> Decimal | None:
        return self._priced(self.runtime_s) if self.runtime_s is not None else None


def estimate(gpu_model_id: int, tier_id: int | None, gpus: Fraction, runtime_s: int | None) -> CostEstimate:
    """The cost of holding `gpus` of the model at the tier's rate in force now (two cards at most are read)."""
    now = timezone.now()
    cards = RateCard.objects.filter(gpu_model_id=gpu_model_id, effective_from__lte=now).filter(
        Q(tier_id=tier_id) | Q(tier__isnull=True)
    )
    card = RateBook(list(cards.select_related("tier"))).card_for(gpu_model_id, tier_id, now)
    return CostEstimate(gpus=gpus, card=card, runtime_s=runtime_s)


def cost_preview(user, prepared) -> dict:
    """The submit page's cost preview of a prepared submission (apps/workloads/services/submission.py)."""
    return {"cost": estimate(prepared.model.pk, prepared.tier.pk, prepared.gpus, prepared.parsed.max_runtime_s)}
