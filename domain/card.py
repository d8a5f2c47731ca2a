"""The Card aggregate: a character card (V2 core fields) and its default story settings."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain import events as ev
from domain.values import CardData, StorySettings


class Card(Aggregate):
    def __init__(self) -> None:
        self.tenant_id = ""
        self.data = CardData(name="?")
        self.settings = StorySettings()
        self.deleted = False

    @classmethod
    def create(cls, card_id: UUID, tenant_id: str, data: CardData, settings: StorySettings) -> Card:
        return cls._create(
            ev.CardCreated,
            id=card_id,
            tenant_id=tenant_id,
            data=data.model_dump(),
            settings=settings.model_dump(),
        )

    def update(self, data: CardData, settings: StorySettings) -> None:
        if data == self.data and settings == self.settings:
            return
        self.trigger_event(ev.CardUpdated, data=data.model_dump(), settings=settings.model_dump())

    def delete(self) -> None:
        if not self.deleted:
            self.trigger_event(ev.CardDeleted)

    def when(self, event: Any) -> None:
        match event:
            case ev.CardCreated():
                self.tenant_id = event.tenant_id
                self.data = CardData.model_validate(event.data)
                self.settings = StorySettings.model_validate(event.settings)
            case ev.CardUpdated():
                self.data = CardData.model_validate(event.data)
                self.settings = StorySettings.model_validate(event.settings)
            case ev.CardDeleted():
                self.deleted = True
