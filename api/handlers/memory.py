"""A card's memory across its stories: read it, bring it up to date with the card's stories now, audit an
item down to the span of the paths behind it, forget a story, and the user's edits (If-Match)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from aiohttp import web

from api.bootstrap import Service
from api.errors import BadRequestError
from api.http import body, if_match, path_id, query_int, respond, service, tenant
from api.schemas.memory import (
    CardMemoryResponse,
    ForgetStoryRequest,
    HandbookModel,
    ItemSourceModel,
    MemoryHistoryResponse,
    MemoryItemAuditResponse,
    MemoryItemModel,
    MemoryTextRequest,
    RecapModel,
    RecapTextRequest,
    StoryBlockModel,
    SyncMemoryResponse,
)
from api.schemas.stories import EventModel
from domain.aggregates import Written
from domain.application import Changji
from domain.language import Language
from domain.memory.card_memory import CardMemory, RecapNotFoundError, memory_id
from domain.memory.handbook import Tags, parse_handbook, render_handbook
from service.event_records import event_record


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
            _recap_model(memory, r.story_id)
            for r in sorted(memory.recaps.values(), key=lambda r: (r.written_at, str(r.story_id)))
        ],
        merge_due=memory.merge_due,
        merged_by=memory.merged_by,
        merged_at=memory.merged_at,
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
    and merge, now (by the side model when there is one, else by the offline rules); answered once done."""
    svc, tenant_id, card_id = service(request), tenant(request), path_id(request, "card_id")
    synced = await svc.memory.sync(tenant_id, card_id)
    card_id, memory, language = await svc.executor.load(memory_of, svc.app, tenant_id, card_id)
    return respond(
        SyncMemoryResponse(
            recapped=synced.recapped, forgotten=synced.forgotten, remembered=synced.remembered, merged=synced.merged,
            memory=memory_response(card_id, memory, language),
        )
    )  # fmt: skip


def _recap_model(memory: CardMemory, story_id: UUID) -> RecapModel:
    r = memory.recaps[story_id]
    return RecapModel(
        story_id=r.story_id, version=r.version, text=r.text, fingerprint=r.fingerprint,
        first_node_id=r.first_node_id, last_node_id=r.last_node_id, turns=r.turns, author=r.author or "user",
        written_at=r.written_at, forgotten=r.story_id in memory.forgotten,
    )  # fmt: skip


async def audit_item(request: web.Request) -> web.Response:
    """One handbook item and, for each story it is tagged with, the recap behind it and the span of that
    story's path the recap read."""
    svc, item_id = service(request), request.match_info["item_id"]
    card_id, memory, _ = await svc.executor.load(memory_of, svc.app, tenant(request), path_id(request, "card_id"))
    item = memory.handbook.item(item_id) if memory is not None else None
    if memory is None or item is None:
        raise BadRequestError(404, f"card {card_id} has no memory item {item_id}", "path.item_id")
    sources = [ItemSourceModel(story_id=s, recap=_recap_model(memory, s)) for s in item.sources if s in memory.recaps]
    model = MemoryItemModel(item_id=item.item_id, section=item.section, text=item.text, sources=list(item.sources))
    return respond(MemoryItemAuditResponse(card_id=card_id, item=model, sources=sources), version=memory.version)


async def forget_story(request: web.Request) -> web.Response:
    """Forget a story's memory at the user's word (it stays forgotten if the story is restored), and merge."""
    svc, tenant_id, card_id = service(request), tenant(request), path_id(request, "card_id")
    asked = await body(request, ForgetStoryRequest)

    def forget() -> int:
        card = svc.app.card(tenant_id, card_id)
        memory = svc.app.memory.of(card.id)
        if memory is None or asked.story_id not in memory.recaps:
            raise RecapNotFoundError(f"the card's memory holds no recap of story {asked.story_id}", field="story_id")
        return svc.app.memory.forget_story(card.id, asked.story_id, "asked")

    await svc.executor.write(forget)
    await svc.memory.sync(tenant_id, card_id, only=())  # (the merge that forgets it; no story recapped)
    return await _memory_now(svc, tenant_id, card_id)


async def edit_resident(request: web.Request) -> web.Response:
    svc, tenant_id, card_id = service(request), tenant(request), path_id(request, "card_id")
    edit = await body(request, MemoryTextRequest)
    await svc.executor.write(svc.app.memory.edit_resident, tenant_id, card_id, edit.text, if_match(request))
    return await _memory_now(svc, tenant_id, card_id)


async def edit_recap(request: web.Request) -> web.Response:
    svc, tenant_id, card_id = service(request), tenant(request), path_id(request, "card_id")
    story_id, edit = path_id(request, "story_id"), await body(request, RecapTextRequest)
    await svc.executor.write(svc.app.memory.edit_recap, tenant_id, card_id, story_id, edit.text, if_match(request))
    return await _memory_now(svc, tenant_id, card_id)


async def edit_handbook(request: web.Request) -> web.Response:
    """The handbook as text (tags and all), read as data: an item without a tag, or a tag of no story of
    the card, is refused."""
    svc, tenant_id, card_id = service(request), tenant(request), path_id(request, "card_id")
    edit, expected = await body(request, MemoryTextRequest), if_match(request)

    def rewrite() -> Written[CardMemory]:
        memory = svc.app.memory.read(tenant_id, card_id)
        handbook = parse_handbook(edit.text, Tags(set(memory.recaps)))
        return svc.app.memory.edit_handbook(tenant_id, card_id, handbook, expected)

    await svc.executor.write(rewrite)
    return await _memory_now(svc, tenant_id, card_id)


async def _memory_now(svc: Service, tenant_id: str, card_id: UUID) -> web.Response:
    card_id, memory, language = await svc.executor.load(memory_of, svc.app, tenant_id, card_id)
    response = memory_response(card_id, memory, language)
    return respond(response, version=response.version)


async def memory_history(request: web.Request) -> web.Response:
    """The card memory's events, oldest first, a page at a time (`after`: a version; `limit`)."""
    svc, tenant_id, card_id = service(request), tenant(request), path_id(request, "card_id")
    after, limit = query_int(request, "after", 0, 0, 2**62), query_int(request, "limit", 100, 1, 1000)

    def read() -> list[Any]:
        card = svc.app.card(tenant_id, card_id)
        return svc.app.events_of(memory_id(card.id), after or None, limit + 1)

    events = await svc.executor.load(read)
    page = [EventModel(**event_record(e)) for e in events[:limit]]
    more = page[-1].version if len(events) > limit else None
    return respond(MemoryHistoryResponse(card_id=card_id, events=page, next_after=more))
