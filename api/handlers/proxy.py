"""The OpenAI-compatible chat-completions endpoint: a front end that keeps its own history points its base
URL here; changji keeps the story, sends the upstream its memory instead of the history, and relays the
answer (streamed chunks as they come). `service/proxy.py` decides what a request means for the tree."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

import orjson
from aiohttp import web

from api.bootstrap import Service
from api.http import read_body, service, tenant
from api.openai_shape import openai_error
from domain.errors import TurnStateError
from domain.ports import ChatResult, ModelCallError
from domain.values import StopReason
from providers.relay import ClientGone, Relayed
from service.proxy import Chosen, Opened
from service.proxy_requests import BadRequest

STORY, NODE, RECORDED, REASON = "X-Changji-Story", "X-Changji-Node", "X-Changji-Recorded", "X-Changji-Reason"
INLINE_BYTES = 64 << 10  # a longer body is read on a thread


async def chat_completions(request: web.Request) -> web.StreamResponse:
    svc = service(request)
    if svc.relay is None:
        return openai_error(503, "no upstream model is configured (CHANGJI_MAIN_BASE_URL, CHANGJI_MAIN_MODEL)")
    raw = await read_body(request)
    try:  # a front end's whole history: read on from its last request, else whole (off the loop when long)
        reader = svc.proxy.requests
        asked = reader.read_on(tenant(request), raw, most=INLINE_BYTES)
        if asked is None:
            asked = (
                await asyncio.to_thread(reader.read, tenant(request), raw)
                if len(raw) > INLINE_BYTES
                else reader.read_whole(tenant(request), raw)
            )
    except BadRequest as bad:
        return openai_error(400, str(bad), bad.field)
    body = asked.fields
    header = request.headers.get(STORY)
    try:
        hint = UUID(header) if header else None
    except ValueError:
        return openai_error(404, f"{STORY} is not a story id", STORY)
    passing = svc.proxy.passing(asked)
    if passing is not None:  # the front end's own request (a summary, an impersonation): forwarded as it came
        forwarded = {**body, "messages": list(asked.messages)}
        headers = {RECORDED: "false", REASON: passing.reason[:200]}
        if body.get("stream") is True:
            return await _streamed(request, svc, forwarded, None, None, headers)
        return await _answered(svc, tenant(request), forwarded, None, None, headers)
    hint = hint or await svc.executor.load(svc.proxy.story_hint, tenant(request), body.get("user"))
    chosen = await svc.executor.load(svc.proxy.choose, tenant(request), asked, hint)
    if chosen is None:
        names = _names(asked.messages)
        chosen = (await svc.executor.write(svc.proxy.start, tenant(request), asked, names)).value
    model = str(body.get("model") or svc.relay.model)
    opened = (await svc.executor.write(svc.proxy.open, tenant(request), chosen, model)).value
    try:
        sent = await svc.executor.load(svc.proxy.upstream_messages, tenant(request), chosen, opened, asked.messages)
        forwarded = {**body, "messages": sent}
        if body.get("stream") is True:
            return await _streamed(request, svc, forwarded, chosen, opened, _headers(chosen, opened))
        return await _answered(svc, tenant(request), forwarded, chosen, opened, _headers(chosen, opened))
    except BaseException as broke:  # whatever ends the request, the reply it opened does not stay "writing"
        await asyncio.shield(_failed(svc, opened, "error", broke, ""))
        raise


async def _answered(
    svc: Service,
    tenant_id: str,
    forwarded: dict[str, Any],
    chosen: Chosen | None,
    opened: Opened | None,
    headers: dict[str, str],
) -> web.Response:
    assert svc.relay is not None
    started = time.perf_counter()
    try:
        relayed = await svc.relay.complete(forwarded, None)
    except ModelCallError as failed:
        await _failed(svc, opened, "error", failed, "")
        return _upstream_error(failed)
    await _record(svc, tenant_id, chosen, opened, relayed, started)
    return web.Response(body=relayed.body, content_type="application/json", headers=headers)


async def _streamed(
    request: web.Request,
    svc: Service,
    forwarded: dict[str, Any],
    chosen: Chosen | None,
    opened: Opened | None,
    headers: dict[str, str],
) -> web.StreamResponse:
    """The upstream's chunks as they come. The answer starts with its first chunk: an upstream that refuses
    before it (a 4xx) is answered with its own status."""
    assert svc.relay is not None
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **headers})
    streamed: list[str] = []
    started = time.perf_counter()

    async def send(chunk: bytes, text: str) -> None:
        if not response.prepared:
            await response.prepare(request)
        streamed.append(text)
        await response.write(chunk)

    try:
        relayed = await svc.relay.complete(forwarded, send)
    except ModelCallError as failed:
        await _failed(svc, opened, "error", failed, "".join(streamed))
        if not response.prepared:
            return _upstream_error(failed)
        error = {"error": {"message": f"the upstream model failed: {failed}", "type": "api_error"}}
        await response.write(b"data: " + orjson.dumps(error) + b"\n\n")
        return response
    except (ClientGone, ConnectionResetError, asyncio.CancelledError):  # the client went away: what came is kept
        await asyncio.shield(_failed(svc, opened, "disconnected", None, "".join(streamed)))
        raise
    if not response.prepared:
        await response.prepare(request)
    await _record(svc, tenant(request), chosen, opened, relayed, started)  # before [DONE]: clients close on it
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _record(
    svc: Service, tenant_id: str, chosen: Chosen | None, opened: Opened | None, relayed: Relayed, started: float
) -> None:
    if opened is None or chosen is None:
        return
    call = (
        relayed.model or "upstream", relayed.prompt_tokens or 0, relayed.completion_tokens or 0,
        (time.perf_counter() - started) * 1000,
    )  # fmt: skip
    if relayed.tool_calls and opened.continues is None:
        # the upstream called the front end's tools: the reply is written in the request with their results
        detail = "the upstream called the front end's tools: " + ", ".join(relayed.tool_calls)
        await svc.executor.write(svc.app.turns.set_aside_for_tools, opened.reply_id, detail[:500], call)
        return
    if opened.continues is not None:
        if (opened.starts_with + relayed.text).strip():
            await svc.executor.write(svc.proxy.continued, tenant_id, chosen, opened, relayed.text, call)
        return
    result = ChatResult(
        opened.starts_with + relayed.text, (), relayed.model or "upstream", relayed.prompt_tokens,
        relayed.completion_tokens, relayed.finish_reason,
    )  # fmt: skip
    elapsed = (time.perf_counter() - started) * 1000
    played = await svc.executor.write(svc.app.turns.play_round, opened.reply_id, result, elapsed, False)
    if played.ends == "sealed":
        await svc.executor.load(svc.proxy.remember, tenant_id, chosen, opened, played.reply.text)
        fixed = "\n\n".join(chosen.split.fixed)  # the next context would cut turns: a pack is announced now
        await svc.executor.write(svc.views.pack_if_over_budget, tenant_id, chosen.story_id, opened.reply_id, fixed)


async def _failed(
    svc: Service, opened: Opened | None, reason: StopReason, error: BaseException | None, text: str
) -> None:
    """A reply the request opened, ended: what was streamed kept as an unsealed draft (nothing to do when
    the reply has ended already)."""
    if opened is None or opened.continues is not None:
        return
    detail = str(error) if error is not None else "the client went away while the reply streamed"
    try:
        await svc.executor.write(
            svc.app.turns.fail_turn,
            opened.reply_id,
            reason,
            detail[:500],
            opened.starts_with + text,
        )
    except TurnStateError:
        return


def _upstream_error(failed: ModelCallError) -> web.Response:
    """The upstream's refusal of the request (a 4xx but for its key) answered with its status; else 502."""
    outcome = failed.outcome
    status = int(outcome[5:]) if outcome.startswith("http 4") and outcome[5:].isdigit() else 502
    if status in (401, 403):  # the upstream's key, not the client's: the operator's to fix
        status = 502
    return openai_error(status, f"the upstream model answered: {failed}")


def _headers(chosen: Chosen, opened: Opened | None) -> dict[str, str]:
    headers = {STORY: str(chosen.story_id), RECORDED: "true" if opened is not None else "false"}
    if opened is not None:
        headers[NODE] = str(opened.reply_id)
    else:
        headers[REASON] = getattr(chosen.decision, "reason", "")[:200]
    return headers


def _names(messages: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """The character's and the user's names, where the messages carry them (`name`)."""

    def named(role: str) -> str:
        return next((str(m["name"]) for m in messages if m.get("role") == role and m.get("name")), "")

    return named("assistant") or "Assistant", named("user") or "User"


async def models(request: web.Request) -> web.Response:
    """The upstream's models; when it cannot be reached, the configured one."""
    svc = service(request)
    if svc.relay is None:
        return openai_error(503, "no upstream model is configured (CHANGJI_MAIN_BASE_URL, CHANGJI_MAIN_MODEL)")
    try:
        return web.Response(body=await svc.relay.models(), content_type="application/json")
    except (ModelCallError, OSError, TimeoutError):
        listed = {"object": "list", "data": [{"id": svc.relay.model, "object": "model", "owned_by": "upstream"}]}
        return web.json_response(listed)
