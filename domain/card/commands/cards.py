"""Cards: create, update (whole, or field by field against the card as it is), delete, merge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from domain.aggregates import CommandGroup, expect_version
from domain.card.card import Card
from domain.card.commands.base import CardAggregates
from domain.errors import CardInvalidError, CardMergeError, CardNotFoundError
from domain.values import CardData, StorySettings


class CardCommands(CommandGroup[CardAggregates]):
    def create_card(self, card_id: UUID, tenant_id: str, data: CardData, settings: StorySettings) -> int:
        return self.app.commit(Card.create(card_id, tenant_id, data, settings))

    def import_card(
        self,
        card_id: UUID,
        tenant_id: str,
        data: CardData,
        settings: StorySettings,
        source: Mapping[str, Any],
        art: Mapping[str, Any] | None,
        assets: list[dict[str, Any]],
    ) -> int:
        """A card from a file: its fields, what the file was, and its art and other files by content hash
        (their bytes are stored beside the events, under that hash, before this is called)."""
        return self.app.commit(Card.import_file(card_id, tenant_id, data, settings, source, art, assets))

    def update_card(
        self,
        tenant_id: str,
        card_id: UUID,
        data: CardData,
        settings: StorySettings,
        expected_version: int | None = None,
    ) -> int:
        card = self.app.card(tenant_id, card_id)
        expect_version(card, expected_version)
        with self.app.evicting(card):
            card.update(data, settings)
            return self.app.commit(card)

    def revise_card(
        self,
        tenant_id: str,
        card_id: UUID,
        changes: Mapping[str, Any],
        setting_changes: Mapping[str, Any],
        expected_version: int | None = None,
    ) -> int:
        """Merge field and setting changes into the card as it is now (so concurrent edits of different
        fields all survive), then save the result."""
        card = self.app.card(tenant_id, card_id)
        expect_version(card, expected_version)
        try:
            data = CardData.model_validate({**card.data.model_dump(), **changes})
            settings = card.settings.merged(dict(setting_changes))
        except ValidationError as invalid:
            first = invalid.errors()[0]
            raise CardInvalidError(first["msg"], field=".".join(str(p) for p in first["loc"])) from None
        with self.app.evicting(card):
            card.update(data, settings)
            return self.app.commit(card)

    def delete_card(self, tenant_id: str, card_id: UUID) -> int:
        card = self.app.card(tenant_id, card_id)
        with self.app.evicting(card):
            card.delete()
            return self.app.commit(card)

    def merge_card(self, tenant_id: str, card_id: UUID, into: UUID) -> int:
        """Merge a card into another of the tenant's: the card is merged (`CardMerged`: out of the listings,
        and a proxied chat that would make it goes to `into`) and its attached lorebooks are attached to
        `into`, in one transaction. Its stories move with `StoryCommands.move_stories`, after this: a story
        cannot start on the card once it is merged. Merging it again into the card its merges lead to now
        (`into`, or the card `into` was merged into since) changes nothing (0), so a merge cut short is
        finished by asking again; a card whose merges lead to a deleted card may be merged anew."""
        if into == card_id:
            raise CardMergeError("a card cannot be merged into itself", field="into")
        card = self.app.get(Card, card_id, CardNotFoundError)
        if card.tenant_id != tenant_id or (card.deleted and card.merged_into is None):
            raise CardNotFoundError(f"card {card_id} not found")
        now = self.app.merged_end(card)
        if card.merged_into is not None and now is not None and now.id != into:
            raise CardMergeError(f"card {card_id} was merged into card {now.id} already", field="into")
        try:
            target = self.app.card(tenant_id, into)
        except CardNotFoundError:
            raise CardNotFoundError(f"card {into} not found", field="into") from None
        if card.merged_into is not None and now is not None:
            return 0
        with self.app.evicting(card, target):
            card.merge_into(into)
            for lorebook_id, name in card.lorebooks.items():
                target.attach_lorebook(lorebook_id, name)
            return self.app.commit(card, target)
