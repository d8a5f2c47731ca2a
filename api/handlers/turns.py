"""Engine turns: post the user's words (or regenerate, or answer an ask) and get the reply as SSE or JSON;
stop a turn; a reply's draft history; the cost ledger."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import orjson
from aiohttp import web

from api.bootstrap import Service
from api.errors import BadRequestError
from api.http import body, if_match, path_id, respond, service, tenant
from api.schemas.nodes import NodeResponse
from api.schemas.turns import (
    AnswerRequest,
    AskModel,
    CostLine,
    CostsResponse,
    DraftResponse,
    DraftVersionModel,
    PostTurnRequest,
    RegenerateRequest,
    StopResponse,
    ToolActivity,
    TurnResponse,
)
from domain.errors import TurnStateError
from domain.values import NodeView
from engine.turn_types import DONE, TurnEvent, TurnHandle
from engine.turns import TurnRunner
from projections.draft import project_draft

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
HEARTBEAT_SECONDS = 10.0
ENDINGS = ("sealed", "ask", "revised", "stopped", "error")


def _runner(svc: Service) -> TurnRunner:
    if svc.turns is None:
        raise BadRequestError(503, "no main model is configured: set CHANGJI_MAIN_BASE_URL and CHANGJI_MAIN_MODEL")
    return svc.turns


async def post_turn(request: web.Request) -> web.StreamResponse:
    req = await body(request, PostTurnRequest)
    svc, story_id = service(request), path_id(request, "story_id")
    runner = _runner(svc)
    await svc.recall.prepare(story_id, req.text)  # the opening's recall finds the words embedded
    opened = await runner.open(tenant(request), story_id, req.text, req.parent_id, if_match(request))
    handle = runner.start(tenant(request), story_id, opened.reply.id, opened=opened)
    return await _answer(request, svc, story_id, handle, opened.position)


async def regenerate(request: web.Request) -> web.StreamResponse:
    req = await body(request, RegenerateRequest, optional=True)
    svc, story_id = service(request), path_id(request, "story_id")
    runner = _runner(svc)
    opened = await runner.reopen(tenant(request), story_id, req.user_id)
    handle = runner.start(tenant(request), story_id, opened.reply.id, opened=opened)
    return await _answer(request, svc, story_id, handle, opened.position)


async def answer(request: web.Request) -> web.StreamResponse:
    req = await body(request, AnswerRequest)
    svc, reply_id = service(request), path_id(request, "node_id")
    runner = _runner(svc)
    story, reply = await svc.executor.load(svc.app.owned_node, tenant(request), reply_id)
    if reply.phase != "waiting":
        raise TurnStateError("this reply is not waiting for an answer", field="node_id")
    handle = runner.start(tenant(request), story.id, reply_id, answer=req.answer)
    return await _answer(request, svc, story.id, handle, None)


async def stop(request: web.Request) -> web.Response:
    """Stop a running turn (its streamed text stays as an unsealed draft); a turn left waiting or writing
    by a restart is closed the same way."""
    svc, reply_id = service(request), path_id(request, "node_id")
    reply = await svc.executor.load(svc.app.turns.turn_reply, tenant(request), reply_id)
    handle = svc.turns.running.get(reply_id) if svc.turns is not None else None
    running = handle is not None and svc.turns is not None and svc.turns.stop(reply_id, "stopped")
    if handle is not None and running:
        await asyncio.wait([handle.task])  # the turn records its stop before it ends
        if handle.late_stop is not None:  # …or right after, if it was stopped before it began
            await handle.late_stop
    elif reply.phase == "writing" and svc.turns is not None and await svc.turns.stop_elsewhere(reply_id):
        running = True  # (another worker runs it: it stopped it, keeping what it streamed)
        await svc.read_side.sync()
    elif reply.phase in ("writing", "waiting"):
        await svc.executor.write(svc.app.turns.fail_turn, reply_id, "stopped", "stopped while no turn was running", "")
    view = await svc.executor.load(svc.app.node, reply_id)
    return respond(StopResponse(reply=NodeResponse.of(view), was_running=running))


async def draft(request: web.Request) -> web.Response:
    svc, node_id = service(request), path_id(request, "node_id")
    _, node = await svc.executor.load(svc.app.owned_node, tenant(request), node_id)
    history = project_draft(await svc.executor.load(svc.app.events_of, node_id))
    return respond(
        DraftResponse(
            node_id=node_id, phase=node.phase, version=node.draft_version, text=node.text,
            sealed_version=history.sealed_version,
            versions=[DraftVersionModel.model_validate(v, from_attributes=True) for v in history.versions],
            asks=history.asks, refusals=history.refusals, stopped=history.stopped, revisions=history.revisions,
        )
    )  # fmt: skip


async def story_costs(request: web.Request) -> web.Response:
    svc, story_id = service(request), path_id(request, "story_id")
    await svc.executor.load(svc.app.story, tenant(request), story_id)
    return _costs(await svc.executor.query(svc.store.costs, story_id=story_id))


async def card_costs(request: web.Request) -> web.Response:
    svc, card_id = service(request), path_id(request, "card_id")
    await svc.executor.load(svc.app.card, tenant(request), card_id)
    return _costs(await svc.executor.query(svc.store.costs, card_id=card_id))


def _costs(rows: list[dict[str, Any]]) -> web.Response:
    lines = [CostLine.model_validate(r) for r in rows]
    return respond(
        CostsResponse(
            lines=lines,
            calls=sum(line.calls for line in lines),
            prompt_tokens=sum(line.prompt_tokens for line in lines),
            completion_tokens=sum(line.completion_tokens for line in lines),
        )
    )


async def _answer(
    request: web.Request, svc: Service, story_id: UUID, handle: TurnHandle, opened: int | None
) -> web.StreamResponse:
    """Stream the turn (SSE) or answer once it ends (JSON). Either way no read comes before the turn's
    own nodes are in the read models: a stream starts after they are (the model is already working),
    a JSON answer after the whole turn is."""
    if "text/event-stream" in request.headers.get("Accept", ""):
        if opened is not None:
            await svc.read_side.sync(opened)
        return await _stream(request, svc, handle)
    events = await _collect(handle)
    return respond(_turn_response(story_id, await _final_view(svc, handle), events), 201)


async def _final_view(svc: Service, handle: TurnHandle) -> NodeView:
    """The reply as the turn left it: the task's own result (saved, and in the read models by the time
    the turn ends), or a fresh load if the task was cancelled before it ran or broke."""
    task = handle.task
    await asyncio.wait([task])
    if not task.cancelled() and task.exception() is None:
        return task.result()
    return await svc.executor.load(svc.app.node, handle.reply_id)


async def _collect(handle: TurnHandle) -> list[TurnEvent]:
    events = []
    while (event := await handle.events.get()).kind != DONE:
        events.append(event)
    return events


def _turn_response(story_id: UUID, view: Any, events: list[TurnEvent]) -> TurnResponse:
    final = next((e for e in reversed(events) if e.kind in ENDINGS), None)
    outcome = "asked" if final and final.kind == "ask" else final.kind if final else "stopped"
    return TurnResponse(
        story_id=story_id,
        reply=NodeResponse.of(view),
        outcome=outcome,
        ask=AskModel.model_validate(final.data) if final and final.kind == "ask" else None,
        tools=[ToolActivity.model_validate(e.data) for e in events if e.kind == "tool"],
        error=final.data if final and final.kind == "error" else None,
    )


async def _stream(request: web.Request, svc: Service, handle: TurnHandle) -> web.StreamResponse:
    """Server-sent events until the turn ends. A client that goes away stops the turn (its draft is kept)."""
    response = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await response.prepare(request)
    try:
        while True:
            try:
                event = await asyncio.wait_for(handle.events.get(), HEARTBEAT_SECONDS)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            await response.write(_sse(event))
            if event.kind == DONE:
                break
    except (ConnectionResetError, asyncio.CancelledError):
        if svc.turns is not None:
            svc.turns.stop(handle.reply_id, "disconnected")
        raise
    return response


def _sse(event: TurnEvent) -> bytes:
    return b"event: " + event.kind.encode() + b"\ndata: " + orjson.dumps(event.data) + b"\n\n"
