"""The Card aggregate: a character card (its fields kept verbatim), its default story settings, the
file it was imported from (art and other files by content hash) and the lorebooks attached to it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.card.events import (
    CardCreated,
    CardDeleted,
    CardImported,
    CardMerged,
    CardUpdated,
    LorebookAttached,
    LorebookDetached,
)
from domain.values import CardData, StorySettings


class Card(Aggregate):
    def __init__(self) -> None:
        self.tenant_id = ""
        self.data = CardData(name="?")
        self.settings = StorySettings()
        self.deleted = False
        self.source: dict[str, Any] = {}
        self.art: dict[str, Any] | None = None
        self.assets: list[dict[str, Any]] = []
        self.lorebooks: dict[UUID, str] = {}  # attached, in the order they were attached
        self.merged_into: UUID | None = None  # the card this one was merged into (it is deleted too)

    @classmethod
    def create(cls, card_id: UUID, tenant_id: str, data: CardData, settings: StorySettings) -> Card:
        return cls._create(
            CardCreated,
            id=card_id,
            tenant_id=tenant_id,
            data=data.model_dump(),
            settings=settings.model_dump(),
        )

    @classmethod
    def import_file(
        cls,
        card_id: UUID,
        tenant_id: str,
        data: CardData,
        settings: StorySettings,
        source: Mapping[str, Any],
        art: Mapping[str, Any] | None,
        assets: list[dict[str, Any]],
    ) -> Card:
        return cls._create(
            CardImported,
            id=card_id,
            tenant_id=tenant_id,
            data=data.model_dump(),
            settings=settings.model_dump(),
            source=dict(source),
            art=dict(art) if art is not None else None,
            assets=assets,
        )

    def update(self, data: CardData, settings: StorySettings) -> None:
        if data == self.data and settings == self.settings:
            return
        self.trigger_event(CardUpdated, data=data.model_dump(), settings=settings.model_dump())

    def delete(self) -> None:
        if not self.deleted:
            self.trigger_event(CardDeleted)

    def merge_into(self, into: UUID) -> None:
        if self.merged_into != into:
            self.trigger_event(CardMerged, into=into)

    def attach_lorebook(self, lorebook_id: UUID, name: str) -> None:
        if lorebook_id not in self.lorebooks:
            self.trigger_event(LorebookAttached, lorebook_id=lorebook_id, name=name)

    def detach_lorebook(self, lorebook_id: UUID) -> None:
        if lorebook_id in self.lorebooks:
            self.trigger_event(LorebookDetached, lorebook_id=lorebook_id)

    def when(self, event: Any) -> None:
        match event:
            case CardCreated():
                self.tenant_id = event.tenant_id
                self.data = CardData.model_validate(event.data)
                self.settings = StorySettings.model_validate(event.settings)
            case CardImported():
                self.tenant_id, self.source, self.art, self.assets = (
                    event.tenant_id,
                    event.source,
                    event.art,
                    event.assets,
                )
                self.data = CardData.model_validate(event.data)
                self.settings = StorySettings.model_validate(event.settings)
            case CardUpdated():
                self.data = CardData.model_validate(event.data)
                self.settings = StorySettings.model_validate(event.settings)
            case CardDeleted():
                self.deleted = True
            case CardMerged():
                self.deleted, self.merged_into = True, event.into
            case LorebookAttached():
                self.lorebooks[event.lorebook_id] = event.name
            case LorebookDetached():
                self.lorebooks.pop(event.lorebook_id, None)
