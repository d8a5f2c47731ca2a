"""One turn's rounds (engine mode): the model called, each round recorded by `app.turns.play_round`
before the next begins, the model's memory and lore searches answered, and the turn's end (sealed,
asked, revised, stopped, or an error that keeps the draft). `TurnRunner` (`engine/turns.py`) starts
and stops the task that runs it."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from domain.application import Changji
from domain.errors import TurnStateError
from domain.language import Language
from domain.ports import ChatModel, ChatResult, ModelCallError, ToolCall
from domain.tree.commands.turns import Round
from domain.tree.draft_tools import TOOL_TEXTS, LoreFound, lore_request, memory_request
from domain.tree.turn_events import TurnAsked
from domain.values import NodeView, Recollection, StopReason
from engine.tool_schemas import ENGINE_RULES, TOOLS
from engine.tool_stream import STREAMED_TOOLS, ContentStream
from engine.turn_types import (
    DONE,
    ContextAt,
    Folds,
    LoreSearch,
    MemorySearch,
    Opened,
    Runs,
    TurnEvent,
    TurnHandle,
)
from projections.context.records import Context

log = logging.getLogger(__name__)
# a model call still out after this long leaves the loop idle: the read models fold the turn's saves
# meanwhile (a quick call streams on the loop and would only compete; the turn's end folds the rest)
FOLD_WHILE_WAITING = 0.05


class TurnLoop:
    def __init__(
        self,
        app: Changji,
        runs: Runs,
        folds: Folds,
        context: ContextAt,
        model: ChatModel,
        max_rounds: int,
        memory: MemorySearch | None,
        lore: LoreSearch | None,
        prepare: Callable[[str, UUID, UUID | None], Awaitable[None]],
    ) -> None:
        """`prepare(tenant, story, node)`: embeds recall's query for the context at that node, ahead of it."""
        self.app, self.runs, self.folds, self.context = app, runs, folds, context
        self.model, self.max_rounds, self.memory, self.lore = model, max_rounds, memory, lore
        self._prepare = prepare

    async def run(
        self, handle: TurnHandle, tenant_id: str, story_id: UUID, answer: str | None, opened: Opened | None
    ) -> NodeView:
        emit = handle.events.put_nowait
        preview: list[str] = []
        try:
            begun = await self._begin(handle, tenant_id, story_id, answer, opened, emit)
            if isinstance(begun, NodeView):  # the answer was refused: that turn is someone else's now
                return begun
            return await self._rounds(handle, begun, opened.position if opened else None, preview, emit)
        except ModelCallError as failure:
            detail = f"{failure.outcome}: {failure}"
            view = await self._fail(handle, "error", detail, preview, (failure.outcome, failure.elapsed_ms))
            emit(
                TurnEvent(
                    "error", {"outcome": failure.outcome, "detail": str(failure), "draft_version": view.draft_version}
                )
            )
            return view
        except Exception as failure:  # a bug or a broken store: the turn ends as an error, the draft is kept
            log.exception("turn %s failed", handle.reply_id)
            view = await self._fail(handle, "error", repr(failure), preview)
            emit(TurnEvent("error", {"outcome": "internal", "detail": "the engine failed; the draft was kept"}))
            return view
        except asyncio.CancelledError:
            since = handle.calling_since
            cut: tuple[str, float] | None = (
                (handle.stop_reason, (time.perf_counter() - since) * 1000) if since is not None else None
            )
            view = await self._fail(handle, handle.stop_reason, "", preview, cut)
            emit(TurnEvent("stopped", {"reason": handle.stop_reason, "draft_version": view.draft_version}))
            raise
        finally:
            handle.finished = True
            emit(TurnEvent(DONE, {}))

    async def _begin(
        self,
        handle: TurnHandle,
        tenant_id: str,
        story_id: UUID,
        answer: str | None,
        opened: Opened | None,
        emit: Callable[[TurnEvent], None],
    ) -> list[dict[str, Any]] | NodeView:
        """The first request's messages (after recording the answer, when resuming); or, when the
        answer is refused, the reply as it stands."""
        resume: list[dict[str, Any]] = []
        answered = None
        if answer is not None:  # the ask call and its answer go back to the model as a tool result,
            # with the draft as it stands (earlier rounds live on in the draft itself)
            try:
                answered = await self.runs.write(self.app.turns.answer_ask, tenant_id, handle.reply_id, answer)
            except TurnStateError as refused:  # answered meanwhile by someone else: leave that turn be
                emit(TurnEvent("error", {"outcome": "conflict", "detail": str(refused)}))
                return await self.runs.load(self.app.node, handle.reply_id)
            reply = answered.reply
        elif opened is not None:
            reply = opened.reply
        else:
            reply = await self.runs.load(self.app.node, handle.reply_id)
        emit(TurnEvent("turn", {"reply_id": str(reply.id), "user_id": str(reply.parent_id), "model": self.model.model}))
        handle.shown = reply.text
        context = opened.context if opened is not None and answer is None else None
        if context is None:
            await self._prepare(tenant_id, story_id, reply.parent_id)
            context = await self.runs.load(self.context, tenant_id, story_id, reply.parent_id)
        if answered is not None and answer is not None:
            resume = _answered(answered.ask, answer, reply, context.language)
        return _opening(context) + resume

    async def _rounds(
        self,
        handle: TurnHandle,
        messages: list[dict[str, Any]],
        saved: int | None,
        preview: list[str],
        emit: Callable[[TurnEvent], None],
    ) -> NodeView:
        """Model rounds until one ends the turn; the last round runs without tools. `saved`: the
        position of the turn's last save, for the read models to fold while the model is working."""
        for round_no in range(1, self.max_rounds + 2):
            preview.clear()
            with_tools = round_no <= self.max_rounds
            result, elapsed = await self._call(handle, messages, with_tools, preview, emit, saved)
            memory = await self._search_memory(handle, result) if with_tools else None
            lore = await self._search_lore(handle, result) if with_tools else None
            played = await self.runs.command(
                self._play_round, handle.reply_id, result, elapsed, with_tools, memory, lore
            )
            for outcome in played.outcomes:
                emit(TurnEvent("tool", {"name": outcome.name, "ok": outcome.ok, "result": outcome.content}))
            if played.reply.text != handle.shown and played.ends != "sealed":  # (a sealed event carries the text)
                # the streamed words are not what was recorded (a refused call, an edit): the draft as it is
                emit(TurnEvent("delta", {"text": played.reply.text, "tool": "draft", "call": None, "first": True}))
            handle.shown = played.reply.text
            if played.ends is not None:
                await self.folds.sync(played.position)  # the client's next read sees the whole turn
                return self._ended(played, emit)
            messages += [_assistant(result.text, result.tool_calls), *_tool_results(played)]
            saved = played.position
        raise AssertionError("the last round runs without tools and always ends the turn")

    async def _fail(
        self,
        handle: TurnHandle,
        reason: StopReason,
        detail: str,
        preview: list[str],
        call: tuple[str, float] | None = None,
    ) -> NodeView:
        """End the turn without a seal, keeping what was streamed as the draft."""
        written = await self.runs.write(
            self.app.turns.fail_turn, handle.reply_id, reason, detail, "".join(preview), call
        )
        if not written.position:  # nothing left to record (the turn had ended): its end may not be folded yet
            await self.folds.sync()
        return written.value

    async def _search_memory(
        self, handle: TurnHandle, result: ChatResult
    ) -> dict[str, list[Recollection] | None] | None:
        """The round's `memory_search` calls, searched before the round is played (off the command, which
        only records what each answered). A search that fails (None) is refused."""
        if self.memory is None or handle.story_id is None:
            return None
        found: dict[str, list[Recollection] | None] = {}
        for call in result.tool_calls:
            asked = memory_request(call) if call.name == "memory_search" else None
            if asked is None:
                continue
            try:
                found[call.id] = await self.memory(handle.tenant_id, handle.story_id, handle.reply_id, *asked)
            except Exception:
                log.exception("memory_search for turn %s failed; the call is refused", handle.reply_id)
                found[call.id] = None
        return found

    async def _search_lore(self, handle: TurnHandle, result: ChatResult) -> dict[str, list[LoreFound] | None] | None:
        """The round's `lorebook_search` calls, answered before the round is played (a failed one is refused)."""
        if self.lore is None or handle.story_id is None:
            return None
        found: dict[str, list[LoreFound] | None] = {}
        for call in result.tool_calls:
            asked = lore_request(call) if call.name == "lorebook_search" else None
            if asked is None:
                continue
            try:
                found[call.id] = await self.runs.load(
                    self.lore, handle.tenant_id, handle.story_id, handle.reply_id, *asked
                )
            except Exception:
                log.exception("lorebook_search for turn %s failed; the call is refused", handle.reply_id)
                found[call.id] = None
        return found

    def _play_round(
        self,
        reply_id: UUID,
        result: ChatResult,
        elapsed: float,
        tools_allowed: bool,
        memory: dict[str, list[Recollection] | None] | None = None,
        lore: dict[str, list[LoreFound] | None] | None = None,
    ) -> Round:
        """One command: record a round and, if it ends the turn, fold it into the read models
        right there, before the loop hears of it (the turn answers only once they show it)."""
        played = self.app.turns.play_round(reply_id, result, elapsed, tools_allowed, memory, lore)
        if played.ends is not None:
            try:
                self.folds.fold_now(played.position)
            except Exception:  # the round is saved: the loop's sync() tries again, and reports a failure
                log.warning("read-model catch-up after turn %s failed; retrying from the loop", reply_id)
        return played

    async def _call(
        self,
        handle: TurnHandle,
        messages: list[dict[str, Any]],
        with_tools: bool,
        preview: list[str],
        emit: Callable[[TurnEvent], None],
        saved: int | None = None,
    ) -> tuple[ChatResult, float]:
        """One model call. `saved`: the position of the turn's last save, which the read models fold
        in the background if the call is still out after FOLD_WHILE_WAITING."""

        def on_text(delta: str) -> None:
            preview.append(delta)
            emit(TurnEvent("delta", {"text": delta}))

        contents: dict[int, ContentStream] = {}

        def on_call(index: int, name: str, fragment: str) -> bool:
            """The reply's words inside a draft_write / draft_append call, streamed as they arrive: a
            delta that names its tool (the first of a draft_write starts the shown draft over — an empty
            one too, once its content has ended; the first of a draft_append onto a draft with text
            opens with the separator the call will join them with — its own, when it came before the
            content, else the tool's default). True when a delta went out."""
            if name not in STREAMED_TOOLS:
                return False
            content = contents.setdefault(index, ContentStream())
            first = not content.at_all
            text = content.feed(fragment)
            emptied = first and not text and content.done and name == "draft_write"  # (an empty draft shown)
            if text or emptied:
                if first and name == "draft_write":
                    handle.shown = ""
                elif first and handle.shown:
                    text = content.separator() + text
                content.at_all = True
                handle.shown += text
                emit(TurnEvent("delta", {"text": text, "tool": name, "call": index, "first": first}))
            return bool(text) or emptied

        loop = asyncio.get_running_loop()
        fold = loop.call_later(FOLD_WHILE_WAITING, self.folds.sync_soon, saved) if saved is not None else None
        start = handle.calling_since = time.perf_counter()
        try:
            result = await self.model.chat(messages, TOOLS if with_tools else None, on_text=on_text, on_call=on_call)
        except ModelCallError as failure:
            handle.calling_since = None
            failure.elapsed_ms = (time.perf_counter() - start) * 1000
            raise
        finally:
            if fold is not None:
                fold.cancel()  # if it has not fired, a later fold (at the latest the turn's end) covers it
        handle.calling_since = None  # still set if a stop cancels the call: the ledger records it
        return result, (time.perf_counter() - start) * 1000

    @staticmethod
    def _ended(played: Round, emit: Callable[[TurnEvent], None]) -> NodeView:
        reply = played.reply
        if played.ends == "asked":
            ask = played.ask
            assert ask is not None
            data = {"reply_id": str(reply.id), "ask_id": ask.ask_id, "question": ask.question, "options": ask.options}
            emit(TurnEvent("ask", data))
        elif played.ends == "sealed":
            emit(TurnEvent("sealed", {"reply_id": str(reply.id), "version": reply.draft_version, "text": reply.text}))
        elif played.ends == "revised":
            emit(TurnEvent("revised", {"reply_id": str(reply.id)}))
        else:
            emit(TurnEvent("stopped", {"reason": str(played.ends), "draft_version": reply.draft_version}))
        return reply


def _opening(context: Context) -> list[dict[str, Any]]:
    """The assembled context with the draft rules appended to the (byte-stable) system prompt."""
    system, *rest = context.messages
    return [{"role": "system", "content": f"{system.content}\n\n{ENGINE_RULES[context.language]}"}] + [
        {"role": m.role, "content": m.content} for m in rest
    ]


def _assistant(text: str, calls: tuple[ToolCall, ...]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ],
    }


def _tool_results(played: Round) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": o.call_id, "content": o.content} for o in played.outcomes]


def _answered(ask: TurnAsked, answer: str, reply: NodeView, language: Language) -> list[dict[str, Any]]:
    arguments = json.dumps({"question": ask.question, "options": ask.options}, ensure_ascii=False)
    texts = TOOL_TEXTS[language]
    draft = texts["draft_now"].format(version=reply.draft_version, text=reply.text) if reply.text else texts["empty"]
    return [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": ask.ask_id, "type": "function", "function": {"name": "ask", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": ask.ask_id, "content": texts["answered"].format(answer=answer) + draft},
    ]  # fmt: skip
