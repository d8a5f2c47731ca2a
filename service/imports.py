"""Files from other systems made into cards, lorebooks and stories: the steps the HTTP routes and the
`changji import` command share. Each file is read first (`read_*`: off the writer — it touches no store,
but for a card's art and files, stored by hash before the event that names them), then saved (`save_*`:
on the writer). A refused file raises its reader's error (`CardFormatError`, `LorebookFormatError`,
`ChatFormatError`) or pydantic's `ValidationError` before anything is stored. (A card whose event then
fails to commit leaves its files behind, named by no event: harmless, and the same upload reuses them.)"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import orjson

from domain.aggregates import Written
from domain.application import Changji
from domain.card.card import Card
from domain.card.lorebook import Lorebook
from domain.tree.commands.chat_imports import ImportedChat
from domain.tree.story import Story
from domain.values import CardData, StorySettings
from interchange.card_data import CardLimits, ImportedCard
from interchange.cards import read_card
from interchange.chat_plan import ChatImportPlan, ChatLimits
from interchange.chats import read_chat
from interchange.lorebook_fields import LorebookFormatError
from interchange.lorebooks import ImportedLorebook, character_book_entries, read_lorebook
from service.chat_transfer import imported_chat
from storage.service_db import ServiceData


@dataclass(frozen=True, slots=True)
class CardFile:
    data: CardData
    file: ImportedCard
    filename: str | None
    art: dict[str, Any] | None
    assets: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ChatFile:
    plan: ChatImportPlan
    chat: ImportedChat


class Importer:
    def __init__(self, app: Changji, blobs: ServiceData, max_bytes: int) -> None:
        self.app, self.blobs, self.max_bytes = app, blobs, max_bytes

    def read_card(self, raw: bytes, filename: str | None = None) -> CardFile:
        """The card file read and checked (its embedded lorebook too); its art and files stored by hash."""
        imported = read_card(raw, CardLimits(max_bytes=self.max_bytes, max_unpacked_bytes=2 * self.max_bytes))
        data = CardData.model_validate(imported.data)
        check_character_book(imported.data)
        art = self._stored(imported.image, "image/png") if imported.image else None
        assets = [{"path": p, **self._stored(blob, _media_type(p))} for p, blob in imported.assets.items()]
        return CardFile(data, imported, filename, art, assets)

    def save_card(self, tenant_id: str, card_id: UUID, card: CardFile) -> Written[Card]:
        """The card read as a new card; one that exists (a retried keyed request) is answered as it is."""
        position = 0
        if not self.app.exists(Card, card_id):
            imported, art, assets = card.file, card.art, card.assets
            source: dict[str, Any] = {
                "container": imported.container,
                "spec": imported.spec,
                "warnings": list(imported.warnings),
            }
            if card.filename:
                source["filename"] = card.filename
            position = self.app.cards.import_card(card_id, tenant_id, card.data, StorySettings(), source, art, assets)
        return Written(self.app.card(tenant_id, card_id), position)

    @staticmethod
    def read_lorebook(raw: bytes, name: str = "") -> ImportedLorebook:
        """A World Info file: SillyTavern's, a V3 `lorebook_v3`, or a card whose `character_book` it takes."""
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError as bad:
            raise LorebookFormatError(f"the lorebook is not JSON: {bad}", "body") from None
        return read_lorebook(parsed, name=name)

    def save_lorebook(
        self, tenant_id: str, card_id: UUID, lorebook_id: UUID, book: ImportedLorebook
    ) -> Written[Lorebook]:
        """The book attached to the card; one that exists (a retried keyed request) is answered as it is."""
        if self.app.exists(Lorebook, lorebook_id):
            return Written(self.app.lore.lorebook(tenant_id, card_id, lorebook_id), 0)
        return self.app.lore.attach_lorebook(
            tenant_id, card_id, lorebook_id, book.name or "lorebook", book.format, book.scan, book.entries,
            book.extras,
        )  # fmt: skip

    def read_chat(self, card: CardData, raw: bytes, title: str = "") -> ChatFile:
        plan = read_chat(raw, ChatLimits(max_bytes=self.max_bytes))
        return ChatFile(plan, imported_chat(plan, card, title))

    def save_chat(self, tenant_id: str, card_id: UUID, story_id: UUID, chat: ChatFile) -> Written[Story]:
        """The chat as a new story of the card (`service/chat_transfer.py`); one that exists is answered."""
        if self.app.exists(Story, story_id):
            return Written(self.app.story(tenant_id, story_id), 0)
        name = chat.plan.user_name.strip()
        settings = {"user_name": name} if 0 < len(name) <= 100 else {}  # the chat's persona fills {{user}}
        return self.app.imports.import_chat(tenant_id, card_id, story_id, chat.chat, settings)

    def _stored(self, blob: bytes, media_type: str) -> dict[str, Any]:
        return {"sha256": self.blobs.put_blob(blob, media_type), "media_type": media_type, "size": len(blob)}


def check_character_book(data: Mapping[str, Any]) -> None:
    """A card's embedded lorebook must be one changji can read (else its lore would be silently lost):
    LorebookFormatError, naming the field, when it is not."""
    book = data.get("character_book")
    if book is not None:
        character_book_entries(book, at="body.data.character_book")


def _media_type(path: str) -> str:
    return mimetypes.guess_type(path)[0] or "application/octet-stream"
