"""Chats from other front ends: a SillyTavern `.jsonl` into a new story of a card, and a story back out."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from aiohttp import web

from api.errors import BadRequestError
from api.handlers.stories import story_response
from api.http import new_id, path_id, query_id, respond, service, tenant
from api.schemas.stories import ImportChatResponse
from api.uploads import upload
from interchange.chat_plan import ChatFormatError
from service.chat_exports import chat_export
from service.chat_transfer import NOTED

SCOPES = ("tree", "path")


async def import_chat(request: web.Request) -> web.Response:
    svc, card_id = service(request), query_id(request, "card_id")
    if card_id is None:
        raise BadRequestError(422, "card_id is required: the card the chat was played with", "query.card_id")
    card = await svc.executor.load(svc.app.card, tenant(request), card_id)
    file = await upload(request)
    try:
        read = await asyncio.to_thread(
            svc.importer.read_chat, card.data, file.data, request.query.get("title", "")[:200]
        )
    except ChatFormatError as bad:
        raise BadRequestError(422, bad.reason, f"body.{bad.field}") from None
    saved = await svc.executor.write(svc.importer.save_chat, tenant(request), card_id, new_id(request, "story"), read)
    story = saved.value
    answer = ImportChatResponse(
        story=await story_response(svc, story),
        steps=len(read.chat.steps),
        nodes=story.imported_nodes,
        warnings=list(read.plan.warnings[:NOTED]),
        skipped_lines=list(read.plan.skipped_lines[:NOTED]),
        warning_count=len(read.plan.warnings),
        skipped_count=len(read.plan.skipped_lines),
    )
    return respond(answer, 201, story.version)


async def export_chat(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    if request.query.get("format", "sillytavern") != "sillytavern":
        raise BadRequestError(422, "format must be sillytavern", "query.format")
    scope = request.query.get("scope", "tree")
    if scope not in SCOPES:
        raise BadRequestError(422, "scope must be tree (siblings as swipes) or path", "query.scope")
    exported = await svc.executor.load(
        chat_export, svc.app, svc.store, tenant(request), story_id, query_id(request, "at"), scope == "tree"
    )
    response = web.Response(body=exported.data, content_type="application/jsonl", charset="utf-8")
    name = f"{exported.title}.jsonl"
    response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(name)}"
    return response
