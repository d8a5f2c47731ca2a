"""Finding a tenant's cards, and where a card's merges lead, over the application's aggregates."""

from __future__ import annotations

from uuid import UUID

from domain.aggregates import Aggregates
from domain.card.card import Card
from domain.errors import CardNotFoundError

MERGE_HOPS = 1000  # a card merged into one merged in turn… (each merge's target was live when it was made)


def live_card(aggregates: Aggregates, tenant_id: str, card_id: UUID) -> Card:
    """The tenant's card, unless deleted or merged away (CardNotFoundError, which names the card a merged
    one went to)."""
    card = aggregates.get(Card, card_id, CardNotFoundError)
    if card.tenant_id != tenant_id or card.deleted:
        merged = (
            f" (it was merged into card {card.merged_into})" if card.tenant_id == tenant_id and card.merged_into else ""
        )
        raise CardNotFoundError(f"card {card_id} not found{merged}")
    return card


def merged_end(aggregates: Aggregates, card: Card) -> Card | None:
    """Where a card's merges lead: the card itself when it was never merged, the card its merges end at,
    or None where they end at a deleted card."""
    for _ in range(MERGE_HOPS):
        if card.merged_into is None:
            return None if card.deleted else card
        card = aggregates.get(Card, card.merged_into, CardNotFoundError)
    return None


def merge_target(aggregates: Aggregates, card_id: UUID) -> UUID:
    """The live card a merged card's merges lead to (CardNotFoundError where they end at a deleted one)."""
    end = merged_end(aggregates, aggregates.get(Card, card_id, CardNotFoundError))
    if end is None:
        raise CardNotFoundError(f"card {card_id} was merged into a card deleted since")
    return end.id
