"""What the card's commands need of the application: its aggregates, and a tenant's cards."""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

from domain.aggregates import Aggregates
from domain.card.card import Card


class CardAggregates(Aggregates, Protocol):
    def card(self, tenant_id: str, card_id: UUID) -> Card:
        """The tenant's live card (CardNotFoundError otherwise: another tenant's, deleted or merged away)."""
        ...

    def merged_end(self, card: Card) -> Card | None:
        """Where a card's merges lead: itself when never merged, the card they end at, None at a deleted one."""
        ...
