"""The OpenAI-compatible chat-completions endpoint: a front end that keeps its own history points its base
URL here; changji keeps the story, sends the upstream its memory instead of the history, and relays the
answer (streamed chunks as they come). `service/proxy.py` decides what a request means for the tree."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID

import orjson
from aiohttp import web

from api.bootstrap import Service
from api.http import UUID_TEXT, read_body, service, tenant
from api.openai_shape import openai_error
from domain.errors import TurnStateError
from domain.ports import ChatResult, ModelCallError
from domain.values import StopReason
from providers.relay import ClientGone, Relayed
from service.chat_finder import Chosen
from service.front_end_names import front_end_names
from service.proxy import Opened, Planned
from service.proxy_requests import BadRequest, ProxyRequest
from service.search_rewrites import Rewritten, SearchRewrites

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
    if header is not None and not UUID_TEXT.fullmatch(header):
        return openai_error(404, f"{STORY} is not a story id", STORY)
    hint = UUID(header) if header is not None else None
    passing = svc.proxy.passing(asked)
    if passing is not None:  # the front end's own request (a summary, an impersonation): forwarded as it came
        forwarded = {**body, "messages": list(asked.messages)}
        headers = {RECORDED: "false", REASON: passing.reason[:200]}
        quiet = _Turn(svc, tenant(request), asked, None, None, "")
        if body.get("stream") is True:
            return await _streamed(request, svc, forwarded, quiet, headers)
        return await _answered(svc, forwarded, quiet, headers)
    if asked.split.chat and asked.split.chat[-1].role == "user":  # its recall's words, embedded while the chat is found
        svc.recall.embed_ahead(asked.split.chat[-1].text)
    hint = hint or await svc.executor.load(svc.proxy.story_hint, tenant(request), body.get("user"))
    chosen = await svc.executor.load(svc.proxy.choose, tenant(request), asked, hint)
    planned = await svc.executor.load(svc.proxy.plan, tenant(request), chosen) if chosen is not None else None
    planned, rewritten = await _searched(svc, tenant(request), chosen, planned, asked.messages)
    turn = _Turn(svc, tenant(request), asked, chosen, planned, str(body.get("model") or svc.relay.model))
    turn.rewritten = rewritten
    if chosen is not None and planned is None:  # nothing to record (the chat does not start where the story does)
        forwarded = {**body, "messages": list(asked.messages)}
        headers = _headers(chosen, None)
        if body.get("stream") is True:
            return await _streamed(request, svc, forwarded, turn, headers)
        return await _answered(svc, forwarded, turn, headers)
    outgoing = await svc.executor.load(
        svc.proxy.outgoing, tenant(request), chosen, planned, asked.messages, asked.split
    )
    forwarded = {**body, "messages": outgoing}
    try:
        if body.get("stream") is True:
            return await _streamed(request, svc, forwarded, turn, None)
        return await _answered(svc, forwarded, turn, None)
    except BaseException as broke:  # whatever ends the request, a reply it opened does not stay "writing"
        await asyncio.shield(_failed(svc, turn, "error", broke, ""))
        raise


async def _searched(
    svc: Service, tenant_id: str, chosen: Chosen | None, planned: Planned | None, original: Sequence[Mapping[str, Any]]
) -> tuple[Planned | None, Rewritten | None]:
    """The side model's search of the memory for the request's words (`service/search_rewrites.py`), where
    the context sent upstream recalls: on words the request adds, in that context and noted once the turn
    is written (returned); on words recorded already (a swipe) that were never asked about, noted now."""
    if chosen is None or planned is None or planned.opened.continues is not None or svc.searches.model is None:
        return planned, None
    user_id = planned.opened.user_id
    recalls = lambda: svc.proxy.recalls(tenant_id, chosen, planned, original)  # noqa: E731
    new = next((node for node in planned.nodes if node.id == user_id), None)
    if new is None:
        try:
            words = await svc.executor.load(svc.app.node, user_id)
        except Exception:  # (gone meanwhile: the request's own write says so)
            return planned, None
        await svc.searches.rewrite(tenant_id, words, recalls)
        return planned, None
    unsaved = {node.id: node for node in planned.nodes}
    node_of = lambda node_id: unsaved.get(node_id) or svc.app.node(node_id)  # noqa: E731
    rewritten = await svc.searches.ask(tenant_id, new, recalls, node_of)
    if rewritten is None:
        return planned, None
    nodes = tuple(SearchRewrites.planned(node, rewritten) if node.id == user_id else node for node in planned.nodes)
    return replace(planned, nodes=nodes), rewritten


class _Turn:
    """A request's turn: chosen and planned before the upstream is called, written once it has answered
    (its first streamed chunk, or its whole answer) — an upstream that cannot be reached or fails before
    that leaves nothing behind, neither a reply nor a story."""

    def __init__(
        self, svc: Service, tenant_id: str, asked: ProxyRequest, chosen: Chosen | None, planned: Planned | None,
        model: str,
    ) -> None:  # fmt: skip
        self.svc, self.tenant_id, self.asked, self.model = svc, tenant_id, asked, model
        self.chosen, self.planned = chosen, planned
        self.opened: Opened | None = None
        self.records = chosen is None or planned is not None
        self.rewritten: Rewritten | None = None  # the words' search, noted on them once they are written

    async def open(self) -> None:
        """The turn written (a new story too, when no story continues), once."""
        if self.opened is not None or not self.records:
            return
        proxy, executor = self.svc.proxy, self.svc.executor
        if self.chosen is None:
            names = front_end_names(self.asked.messages)
            started = await executor.write(proxy.start, self.tenant_id, self.asked, names, self.model)
            self.chosen, self.opened = started.value
            self.records = self.opened is not None
        else:
            assert self.planned is not None
            self.opened = (
                await executor.write(proxy.open, self.tenant_id, self.chosen, self.planned, self.model)
            ).value
            if self.rewritten is not None:
                await self.svc.searches.note(self.tenant_id, self.opened.user_id, self.rewritten)

    def headers(self) -> dict[str, str]:
        if self.chosen is None:
            return {RECORDED: "false", REASON: "nothing to record"}
        return _headers(self.chosen, self.opened)


async def _answered(
    svc: Service, forwarded: dict[str, Any], turn: _Turn, headers: dict[str, str] | None
) -> web.Response:
    """The upstream's whole answer; the turn is written once it is in (`headers`: a request that records
    nothing)."""
    assert svc.relay is not None
    started = time.perf_counter()
    try:
        relayed = await svc.relay.complete(forwarded, None)
    except ModelCallError as failed:
        return _upstream_error(failed)
    if headers is None:
        await turn.open()
        await _record(svc, turn, relayed, started)
    return web.Response(body=relayed.body, content_type="application/json", headers=headers or turn.headers())


async def _streamed(
    request: web.Request, svc: Service, forwarded: dict[str, Any], turn: _Turn, headers: dict[str, str] | None
) -> web.StreamResponse:
    """The upstream's chunks as they come. The answer starts with its first chunk, once the turn is written
    (`headers`: a request that records nothing): an upstream that fails before it is answered with an
    error, its own status for a refusal (a 4xx), and nothing is recorded."""
    assert svc.relay is not None
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    streamed: list[str] = []
    started = time.perf_counter()

    async def send(chunk: bytes, text: str) -> None:
        if not response.prepared:
            if headers is None:
                await turn.open()
            response.headers.update(headers or turn.headers())
            await response.prepare(request)
        streamed.append(text)
        await response.write(chunk)

    try:
        relayed = await svc.relay.complete(forwarded, send)
    except ModelCallError as failed:
        await _failed(svc, turn, "error", failed, "".join(streamed))
        if not response.prepared:
            return _upstream_error(failed)
        error = {"error": {"message": f"the upstream model failed: {failed}", "type": "api_error"}}
        await response.write(b"data: " + orjson.dumps(error) + b"\n\n")
        return response
    except (ClientGone, ConnectionResetError, asyncio.CancelledError):  # the client went away: what came is kept
        await asyncio.shield(_failed(svc, turn, "disconnected", None, "".join(streamed)))
        raise
    if not response.prepared:  # (an answer with no chunk at all)
        if headers is None:
            await turn.open()
        response.headers.update(headers or turn.headers())
        await response.prepare(request)
    if headers is None:
        await _record(svc, turn, relayed, started)  # before [DONE]: clients close on it
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _record(svc: Service, turn: _Turn, relayed: Relayed, started: float) -> None:
    chosen, opened, tenant_id = turn.chosen, turn.opened, turn.tenant_id
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


async def _failed(svc: Service, turn: _Turn, reason: StopReason, error: BaseException | None, text: str) -> None:
    """A reply the request opened, ended: what was streamed kept as an unsealed draft (nothing to do when
    nothing was opened, or the reply has ended already)."""
    opened = turn.opened
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
    """Why the upstream gave no answer, in OpenAI's shape: could not connect (502), no answer in time (504),
    broke off before it said anything (502), failed with a 5xx (502, with its own message), refused the request (its 4xx status; a refusal of the
    operator's key for it is 502: not the client's to fix), or answered what cannot be read (502)."""
    outcome, detail = failed.outcome, str(failed)
    if outcome == "network":
        return openai_error(502, f"the upstream model could not be reached: {detail}", code="upstream_unreachable")
    if outcome == "timeout":
        return openai_error(504, f"the upstream model did not answer: {detail}", code="upstream_timeout")
    if outcome == "interrupted":
        return openai_error(502, f"the upstream model broke off: {detail}", code="upstream_error")
    status = int(outcome[5:]) if outcome.startswith("http ") and outcome[5:].isdigit() else 0
    said = _error_message(detail)
    if status in (401, 403):
        return openai_error(502, f"the upstream model refused the key changji has for it ({status}): {said}")
    if 400 <= status < 500:
        return openai_error(status, f"the upstream model refused the request ({status}): {said}")
    if status:
        return openai_error(502, f"the upstream model failed ({status}): {said}", code="upstream_error")
    return openai_error(502, f"the upstream model's answer could not be used: {detail}", code="upstream_error")


def _error_message(body: str) -> str:
    """An upstream error body's own message (OpenAI's `error.message`, or `message`), else the body."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.strip() or "(no message)"
    error = parsed.get("error", parsed) if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return body.strip() or "(no message)"


def _headers(chosen: Chosen, opened: Opened | None) -> dict[str, str]:
    headers = {STORY: str(chosen.story_id), RECORDED: "true" if opened is not None else "false"}
    if opened is not None:
        headers[NODE] = str(opened.reply_id)
    else:
        headers[REASON] = getattr(chosen.decision, "reason", "")[:200]
    return headers


async def models(request: web.Request) -> web.Response:
    """The upstream's models. An upstream that cannot be reached, fails, or refuses the key changji has for
    it is a 502 in OpenAI's shape (a front end's "connect" then shows the failure); one that is reached
    but lists no models (a 404 there) lists the configured one."""
    svc = service(request)
    if svc.relay is None:
        return openai_error(503, "no upstream model is configured (CHANGJI_MAIN_BASE_URL, CHANGJI_MAIN_MODEL)")
    try:
        return web.Response(body=await svc.relay.models(), content_type="application/json")
    except ModelCallError as failed:
        if failed.outcome.startswith("http 4") and failed.outcome not in ("http 401", "http 403"):
            listed = {"object": "list", "data": [{"id": svc.relay.model, "object": "model", "owned_by": "upstream"}]}
            return web.json_response(listed)
        return _upstream_error(failed)
