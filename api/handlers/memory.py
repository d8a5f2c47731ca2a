"""A card's memory across its stories: read it, and bring it up to date with the card's stories now."""

from __future__ import annotations

from uuid import UUID

from aiohttp import web

from api.http import path_id, respond, service, tenant
from api.schemas.memory import (
    CardMemoryResponse,
    HandbookModel,
    MemoryItemModel,
    RecapModel,
    StoryBlockModel,
    SyncMemoryResponse,
)
from domain.application import Changji
from domain.language import Language
from domain.memory.card_memory import CardMemory
from domain.memory.handbook import Tags, render_handbook


def memory_of(app: Changji, tenant_id: str, card_id: UUID) -> tuple[UUID, CardMemory | None, Language]:
    """The card's id, its memory (None: none yet) and its language (a domain read)."""
    card = app.card(tenant_id, card_id)
    return card.id, app.memory.of(card.id), card.data.language(card.settings.language)


def memory_response(card_id: UUID, memory: CardMemory | None, language: Language) -> CardMemoryResponse:
    if memory is None:
        return CardMemoryResponse(
            card_id=card_id, version=0, handbook=HandbookModel(blocks=[], items=[], text=""), resident="", recaps=[],
            merge_due=False,
        )  # fmt: skip
    handbook = memory.handbook
    text = render_handbook(handbook, Tags(handbook.stories | set(memory.recaps)), language)
    return CardMemoryResponse(
        card_id=card_id,
        version=memory.version,
        handbook=HandbookModel(
            blocks=[StoryBlockModel(story_id=b.story_id, title=b.title, text=b.text) for b in handbook.blocks],
            items=[
                MemoryItemModel(item_id=i.item_id, section=i.section, text=i.text, sources=list(i.sources))
                for i in handbook.items
            ],
            text=text,
        ),
        resident=memory.resident,
        recaps=[
            RecapModel(
                story_id=r.story_id,
                version=r.version,
                text=r.text,
                fingerprint=r.fingerprint,
                first_node_id=r.first_node_id,
                last_node_id=r.last_node_id,
                turns=r.turns,
                author=r.author or "user",
                written_at=r.written_at,
                forgotten=r.story_id in memory.forgotten,
            )
            for r in sorted(memory.recaps.values(), key=lambda r: (r.written_at, str(r.story_id)))
        ],
        merge_due=memory.merge_due,
    )


async def get_memory(request: web.Request) -> web.Response:
    svc = service(request)
    card_id, memory, language = await svc.executor.load(
        memory_of, svc.app, tenant(request), path_id(request, "card_id")
    )
    response = memory_response(card_id, memory, language)
    return respond(response, version=response.version)


async def sync_memory(request: web.Request) -> web.Response:
    """Recap the card's stories whose paths changed, forget the deleted ones, remember the restored ones
    and merge, now, by the offline rules; answered once done."""
    svc, tenant_id, card_id = service(request), tenant(request), path_id(request, "card_id")
    synced = await svc.executor.write(svc.memory.sync, tenant_id, card_id)
    card_id, memory, language = await svc.executor.load(memory_of, svc.app, tenant_id, card_id)
    return respond(
        SyncMemoryResponse(
            recapped=synced.recapped, forgotten=synced.forgotten, remembered=synced.remembered, merged=synced.merged,
            memory=memory_response(card_id, memory, language),
        )
    )  # fmt: skip
