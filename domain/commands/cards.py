"""Cards: create, update (whole, or field by field against the card as it is), delete."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from domain.card import Card
from domain.commands.base import CommandGroup, expect_version
from domain.errors import CardInvalidError
from domain.values import CardData, StorySettings


class CardCommands(CommandGroup):
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
