"""Which rate card prices a GPU-hour of a model and tier at an instant."""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from datetime import datetime

from apps.chargeback.models import RateCard


class RateBook:
    """Every rate card, indexed by model and tier, for repeated look-ups (one query)."""

    def __init__(self, cards: list[RateCard] | None = None):
        cards = list(RateCard.objects.order_by("effective_from", "id")) if cards is None else cards
        self._series: dict[tuple[int, int | None], list[RateCard]] = defaultdict(list)
        self._times: dict[int, list[datetime]] = defaultdict(list)
        for card in sorted(cards, key=lambda c: c.effective_from):
            self._series[(card.gpu_model_id, card.tier_id)].append(card)
            self._times[card.gpu_model_id].append(card.effective_from)
        self._starts = {key: [c.effective_from for c in series] for key, series in self._series.items()}

    def _latest(self, key: tuple[int, int | None], at: datetime) -> RateCard | None:
        starts = self._starts.get(key)
        if not starts:
            return None
        index = bisect_right(starts, at) - 1
        return self._series[key][index] if index >= 0 else None

    def card_for(self, gpu_model_id: int | None, tier_id: int | None, at: datetime) -> RateCard | None:
        """The tier's own card in force at `at`, else the model's default card in force; None: no rate."""
        if gpu_model_id is None:
            return None
        if tier_id is not None:
            own = self._latest((gpu_model_id, tier_id), at)
            if own is not None:
                return own
        return self._latest((gpu_model_id, None), at)

    def change_times(self, gpu_model_id: int | None) -> list[datetime]:
        """Instants at which some card of this model takes effect: records are split there."""
        return self._times.get(gpu_model_id, []) if gpu_model_id is not None else []
