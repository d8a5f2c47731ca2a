"""Cards: create, import from a file, read, list, update, export, delete, merge."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote
from uuid import UUID

from aiohttp import web
from pydantic import ValidationError

from api.bootstrap import Service
from api.errors import BadRequestError, RequestBodyError
from api.http import body, if_match, keyed, new_id, path_id, query_int, respond, service, tenant
from api.schemas.cards import (
    CardListResponse,
    CardResponse,
    CardSummary,
    CreateCardRequest,
    FileRef,
    LorebookRef,
    MergeCardRequest,
    MergeCardResponse,
    UpdateCardRequest,
)
from api.uploads import upload
from domain.card.anchor import identity_anchor
from domain.card.card import Card
from domain.values import CardData, StorySettings
from interchange.card_data import CardFormatError
from interchange.card_export import card_charx, card_json, card_png
from interchange.lorebook_fields import LorebookFormatError
from service.imports import check_character_book

MERGE_BATCH = 200  # stories moved in one transaction by a merge


def card_response(card: Card) -> CardResponse:
    return CardResponse(
        id=card.id,
        version=card.version,
        name=card.data.name,
        card=card.data.model_dump(),
        settings=card.settings.model_dump(),
        anchor=identity_anchor(card.data, card.settings),
        language=card.data.language(card.settings.language),
        source=card.source,
        art=FileRef.model_validate(card.art) if card.art else None,
        assets=[FileRef.model_validate(a) for a in card.assets],
        lorebooks=[LorebookRef(id=book_id, name=name) for book_id, name in card.lorebooks.items()],
        created_at=card.created_on,
        updated_at=card.modified_on,
    )


async def import_card(request: web.Request) -> web.Response:
    """A card file as the body (or a multipart file): PNG, JSON or CHARX."""
    svc, file = service(request), await upload(request)
    try:
        read = await asyncio.to_thread(svc.importer.read_card, file.data, file.filename)
    except (CardFormatError, LorebookFormatError) as bad:
        raise BadRequestError(422, bad.reason, bad.field) from None
    except ValidationError as exc:
        raise RequestBodyError(exc, "body.data") from None
    card = (await svc.executor.write(svc.importer.save_card, tenant(request), new_id(request, "card"), read)).value
    return respond(card_response(card), 201, card.version)


EXPORTS = {"v2": "application/json", "v3": "application/json", "png": "image/png", "charx": "application/zip"}
SUFFIXES = {"v2": ".json", "v3": ".json", "png": ".png", "charx": ".charx"}


async def export_card(request: web.Request) -> web.Response:
    """The card as a V2 or V3 JSON file, a PNG with both (its own art, or a plain image), or a CHARX zip (the
    V3 JSON and the files an imported CHARX came with, as they came; else its art as the main icon)."""
    svc, format = service(request), request.query.get("format", "v2")
    if format not in EXPORTS:
        raise BadRequestError(422, "format must be v2, v3, png or charx", "query.format")
    card = await svc.executor.load(svc.app.card, tenant(request), path_id(request, "card_id"))
    data = card.data.model_dump()
    art = (
        await asyncio.to_thread(svc.keys.blob, card.art["sha256"]) if format in ("png", "charx") and card.art else None
    )
    files = await asyncio.to_thread(_files, svc, card) if format == "charx" else []
    try:
        payload = await asyncio.to_thread(_card_file, data, format, art, files)
    except CardFormatError as bad:  # a card made before its fields were checked as a file's are
        raise BadRequestError(422, f"the card cannot be written as a file: {bad.reason}", bad.field) from None
    name = _filename(card.data.name) + SUFFIXES[format]
    response = web.Response(body=payload, content_type=EXPORTS[format])
    response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(name)}"
    response.headers["ETag"] = f'"{card.version}"'
    return response


def _files(svc: Service, card: Card) -> list[tuple[str, bytes]]:
    """The card's own files (an imported CHARX's) by their paths, from the blob store."""
    files = []
    for asset in card.assets:
        content = svc.keys.blob(asset["sha256"]) if asset.get("path") else None
        if asset.get("path") and content is None:  # (blobs are never deleted: a store that lost one is broken)
            raise LookupError(f"the card's file {asset['path']} is missing from the blob store")
        if content is not None:
            files.append((str(asset["path"]), content))
    return files


def _card_file(data: dict[str, Any], format: str, art: bytes | None, files: list[tuple[str, bytes]]) -> bytes:
    if format == "charx":
        return card_charx(data, art, files)
    return card_png(data, art) if format == "png" else card_json(data, "v3" if format == "v3" else "v2")


def _filename(name: str) -> str:
    return "".join(c if c.isalnum() or c in " -_" else "_" for c in name).strip() or "card"


def _settings(overrides: dict[str, object], base: StorySettings | None = None) -> StorySettings:
    try:
        return (base or StorySettings()).merged(overrides)
    except ValidationError as exc:
        raise RequestBodyError(exc, "body.settings") from None


def _readable_book(fields: Mapping[str, Any], at: str) -> None:
    """A card's embedded lorebook must be one changji can read: 422 at its field when not."""
    try:
        check_character_book(fields)
    except LorebookFormatError as bad:
        raise BadRequestError(422, bad.reason, bad.field.replace("body.data", at, 1)) from None


async def create_card(request: web.Request) -> web.Response:
    req = await body(request, CreateCardRequest)
    _readable_book(req.card.model_dump(), "body.card")
    svc, card_id = service(request), new_id(request, "card")
    if not (keyed(request) and await svc.executor.load(svc.app.exists, Card, card_id)):  # (made: answer was lost)
        await svc.executor.write(
            svc.app.cards.create_card, card_id, tenant(request), req.card, _settings(req.settings.given())
        )
    card = await svc.executor.load(svc.app.card, tenant(request), card_id)
    return respond(card_response(card), 201, card.version)


async def get_card(request: web.Request) -> web.Response:
    svc = service(request)
    card = await svc.executor.load(svc.app.card, tenant(request), path_id(request, "card_id"))
    return respond(card_response(card), version=card.version)


async def list_cards(request: web.Request) -> web.Response:
    svc = service(request)
    limit = query_int(request, "limit", 50, 1, 500)
    after = query_int(request, "cursor", 0, 0, 2**62)
    rows = await svc.executor.query(svc.store.list_rows, "cards", tenant(request), after, limit)
    items = [CardSummary.model_validate({**r, "tags": json.loads(r["tags"])}) for r in rows]
    next_cursor = str(rows[-1]["seq"]) if len(rows) == limit else None
    return respond(CardListResponse(items=items, next_cursor=next_cursor))


async def update_card(request: web.Request) -> web.Response:
    req = await body(request, UpdateCardRequest)
    svc, card_id = service(request), path_id(request, "card_id")
    current = await svc.executor.load(svc.app.card, tenant(request), card_id)
    changes, setting_changes = req.card or {}, req.settings.given() if req.settings else {}
    try:  # every invalid field reported at once; the write below merges into the card as it is then
        CardData.model_validate({**current.data.model_dump(), **changes})
    except ValidationError as exc:
        raise RequestBodyError(exc, "body.card") from None
    _readable_book(changes, "body.card")
    _settings(setting_changes, current.settings)
    await svc.executor.write(
        svc.app.cards.revise_card, tenant(request), card_id, changes, setting_changes, if_match(request)
    )
    card = await svc.executor.load(svc.app.card, tenant(request), card_id)
    return respond(card_response(card), version=card.version)


async def delete_card(request: web.Request) -> web.Response:
    svc = service(request)
    await svc.executor.write(svc.app.cards.delete_card, tenant(request), path_id(request, "card_id"))
    return web.Response(status=204)


async def merge_card(request: web.Request) -> web.Response:
    """Merge the card into another (`into`): the card is merged first, so no story starts on it any more,
    then its stories (deleted ones too) move in batches as the read models list them, to the card its
    merges lead to now. Asked again with that card, it moves what a cut-short merge left behind."""
    req = await body(request, MergeCardRequest)
    svc, card_id, tenant_id = service(request), path_id(request, "card_id"), tenant(request)
    await svc.executor.write(svc.app.cards.merge_card, tenant_id, card_id, req.into)
    into = await svc.executor.load(svc.app.merge_target, card_id)  # (`into`, or where it was merged since)
    moved = 0
    for deleted in (0, 1):
        while rows := await svc.executor.query(
            svc.store.list_rows, "stories", tenant_id, 0, MERGE_BATCH, deleted, card_id=str(card_id)
        ):
            ids = [UUID(row["id"]) for row in rows]
            written = await svc.executor.write(svc.app.stories.move_stories, tenant_id, ids, card_id, into)
            if not written.value:
                break  # (listed, but on another card by now: the read models catch up)
            moved += written.value
    card = await svc.executor.load(svc.app.card, tenant_id, into)
    return respond(MergeCardResponse(card=card_response(card), stories_moved=moved), version=card.version)
