"""Cards: create, read, list, update, delete."""

from __future__ import annotations

import json

from aiohttp import web
from pydantic import ValidationError

from api.errors import RequestBodyError
from api.http import body, if_match, keyed, new_id, path_id, query_int, respond, service, tenant
from api.schemas import (
    CardListResponse,
    CardResponse,
    CardSummary,
    CreateCardRequest,
    UpdateCardRequest,
)
from domain.card import Card
from domain.values import CardData, StorySettings


def card_response(card: Card) -> CardResponse:
    return CardResponse(
        id=card.id,
        version=card.version,
        name=card.data.name,
        card=card.data.model_dump(),
        settings=card.settings.model_dump(),
        created_at=card.created_on,
        updated_at=card.modified_on,
    )


def _settings(overrides: dict[str, object], base: StorySettings | None = None) -> StorySettings:
    try:
        return (base or StorySettings()).merged(overrides)
    except ValidationError as exc:
        raise RequestBodyError(exc, "body.settings") from None


async def create_card(request: web.Request) -> web.Response:
    req = await body(request, CreateCardRequest)
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
