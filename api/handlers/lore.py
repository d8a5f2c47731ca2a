"""A card's lorebooks: attach a World Info file, list, read, detach; add, change, switch, approve and
remove entries; search the card's lore as the model's `lorebook_search` does."""

from __future__ import annotations

import asyncio
from uuid import UUID

from aiohttp import web

from api.errors import BadRequestError
from api.http import body, new_id, path_id, query_int, query_text, respond, service, tenant
from api.schemas.lore import (
    LorebookListResponse,
    LorebookResponse,
    LorebookSummary,
    LoreEntryChanges,
    LoreEntryListResponse,
    LoreEntryModel,
    LoreEntryRequest,
    LoreSearchHit,
    LoreSearchResponse,
)
from api.uploads import upload
from domain.card.lore import LoreEntry
from domain.card.lorebook import Lorebook
from interchange.lorebook_fields import LorebookFormatError
from service.lore import EMBEDDED, embedded_name

MAX_QUERY = 500


def _entry(entry: LoreEntry, book: Lorebook | None = None) -> LoreEntryModel:
    where = book.written_at.get(entry.uid) if book else None
    return LoreEntryModel(
        **entry.model_dump(),
        pending=book is not None and entry.uid in book.pending,
        written_at={"story_id": where.story_id, "node_id": where.node_id} if where else None,
    )


def _entry_of(book: Lorebook, uid: int) -> LoreEntryModel:
    return _entry(book.entry(uid), book)


def _book(book: Lorebook) -> LorebookResponse:
    assert book.card_id is not None
    return LorebookResponse(
        id=str(book.id), card_id=book.card_id, version=book.version, name=book.name, kind=book.kind,
        format=book.format, scan=book.scan.model_dump(), extras=book.extras,
        entries=[_entry(e, book) for e in book.entries.values()],
    )  # fmt: skip


async def attach_lorebook(request: web.Request) -> web.Response:
    """A World Info file (SillyTavern's, a V3 `lorebook_v3`, or a card whose `character_book` it takes) as
    the body or a multipart file; `?name=` names it when the file does not."""
    svc, card_id = service(request), path_id(request, "card_id")
    file = await upload(request)
    name = request.query.get("name") or (file.filename or "").removesuffix(".json")
    try:
        read = await asyncio.to_thread(svc.importer.read_lorebook, file.data, name[:200])
    except LorebookFormatError as bad:
        raise BadRequestError(422, bad.reason, bad.field) from None
    book = (
        await svc.executor.write(
            svc.importer.save_lorebook, tenant(request), card_id, new_id(request, "lorebook"), read
        )
    ).value
    return respond(await svc.executor.load(_book, book), 201, book.version)


async def list_lorebooks(request: web.Request) -> web.Response:
    svc = service(request)
    card = await svc.executor.load(svc.app.card, tenant(request), path_id(request, "card_id"))
    books = await svc.executor.load(svc.app.lore.lorebooks, card)
    embedded = await svc.executor.load(svc.views.lore.embedded, card)
    items = [LorebookSummary(id=EMBEDDED, name=embedded_name(card), kind="embedded", entries=len(embedded.entries))] if embedded else []  # fmt: skip
    items += [LorebookSummary(id=str(b.id), name=b.name, kind=b.kind, entries=len(b.entries)) for b in books]
    return respond(LorebookListResponse(items=items))


async def get_lorebook(request: web.Request) -> web.Response:
    book = await _read_book(request)
    return respond(book, version=book.version)


async def list_entries(request: web.Request) -> web.Response:
    """A lorebook's entries by uid, a page at a time (`cursor`: the last uid of the page before)."""
    limit = query_int(request, "limit", 100, 1, 1000)
    after = query_int(request, "cursor", -1, -1, 2**53)
    book = await _read_book(request)
    rest = sorted((e for e in book.entries if e.uid > after), key=lambda e: e.uid)
    page = LoreEntryListResponse(
        lorebook_id=book.id, version=book.version, items=rest[:limit],
        next_cursor=str(rest[limit - 1].uid) if len(rest) > limit else None,
    )  # fmt: skip
    return respond(page, version=book.version)


async def _read_book(request: web.Request) -> LorebookResponse:
    """The lorebook the path names: the card's embedded one, or one attached to it."""
    svc, card_id = service(request), path_id(request, "card_id")
    if request.match_info["lorebook_id"] == EMBEDDED:
        card = await svc.executor.load(svc.app.card, tenant(request), card_id)
        view = await svc.executor.load(svc.views.lore.embedded, card)
        if view is None:
            raise BadRequestError(404, "the card has no embedded lorebook", "path.lorebook_id")
        return LorebookResponse(
            id=EMBEDDED, card_id=card.id, version=card.version, name=embedded_name(card), kind="embedded",
            format="character_book", scan=view.scan.model_dump(), extras={},
            entries=[_entry(e) for e in view.entries],
        )  # fmt: skip
    found = await svc.executor.load(svc.app.lore.lorebook, tenant(request), card_id, _book_id(request))
    return await svc.executor.load(_book, found)


def _book_id(request: web.Request) -> UUID:
    if request.match_info["lorebook_id"] == EMBEDDED:
        raise BadRequestError(
            422, "the embedded lorebook is part of the card: change it with PATCH /v1/cards/{id}", "path.lorebook_id"
        )
    return path_id(request, "lorebook_id")


async def detach_lorebook(request: web.Request) -> web.Response:
    svc = service(request)
    await svc.executor.write(
        svc.app.lore.detach_lorebook, tenant(request), path_id(request, "card_id"), _book_id(request)
    )
    return web.Response(status=204)


async def add_entry(request: web.Request) -> web.Response:
    req = await body(request, LoreEntryRequest)
    svc, card_id, book_id = service(request), path_id(request, "card_id"), _book_id(request)
    fields = req.model_dump(exclude_none=req.uid is None) if req.uid is None else req.model_dump()
    written = await svc.executor.write(svc.app.lore.add_lore_entry, tenant(request), card_id, book_id, fields)
    return respond(_entry(written.value), 201)


async def change_entry(request: web.Request) -> web.Response:
    req = await body(request, LoreEntryChanges)
    svc, card_id, book_id, uid = service(request), path_id(request, "card_id"), _book_id(request), _uid(request)
    changes = req.model_dump(exclude_unset=True)
    written = await svc.executor.write(svc.app.lore.change_lore_entry, tenant(request), card_id, book_id, uid, changes)
    return respond(await svc.executor.load(_entry_of, written.value, uid), version=written.value.version)


async def approve_entry(request: web.Request) -> web.Response:
    svc, card_id, book_id, uid = service(request), path_id(request, "card_id"), _book_id(request), _uid(request)
    written = await svc.executor.write(svc.app.lore.approve_lore_entry, tenant(request), card_id, book_id, uid)
    return respond(await svc.executor.load(_entry_of, written.value, uid), version=written.value.version)


async def remove_entry(request: web.Request) -> web.Response:
    svc, card_id, book_id, uid = service(request), path_id(request, "card_id"), _book_id(request), _uid(request)
    await svc.executor.write(svc.app.lore.remove_lore_entry, tenant(request), card_id, book_id, uid)
    return web.Response(status=204)


def _uid(request: web.Request) -> int:
    value = request.match_info["uid"]
    if not (value.isascii() and value.isdigit()) or int(value) > 2**53:
        raise BadRequestError(404, "uid is not a known entry", "path.uid")
    return int(value)


async def search_lore(request: web.Request) -> web.Response:
    """The card's lore scored for `q` (keys +5, title +3, content +1 a time up to 3; Chinese by character
    pairs), as the model's `lorebook_search` sees it."""
    svc, query = service(request), query_text(request, "q", MAX_QUERY)
    limit = query_int(request, "limit", 10, 1, 100)
    card = await svc.executor.load(svc.app.card, tenant(request), path_id(request, "card_id"))
    found = await svc.executor.load(svc.views.search_lore, card, query, limit)
    items = [LoreSearchHit(book_id=book_id, score=score, entry=_entry(entry)) for score, book_id, entry in found]
    return respond(LoreSearchResponse(query=query, items=items))
