"""The turn loop (engine mode).

A turn runs as its own asyncio task and reports through a queue of `TurnEvent`s (text deltas, tool
activity, an ask, the seal, an error), which the HTTP layer streams as SSE or folds into one JSON
answer. Every model round is recorded by `Changji.play_round` before the next one starts, so the
event store always holds the draft as far as it got.

Per turn, the engine's own time is kept off the model's path where it can be: `open`/`reopen` save
the user's words and the empty reply and assemble the context in one command; each round is one
command, and the last one folds the turn into the read models right after its save (read your
writes). Commands go through `host.command`, which runs them on the event loop itself when the
writer thread is idle (no thread hop; see `Service.command`). While a model call is slow to answer,
the read models fold what the turn saved so far in the background (`sync_soon`), so that catch-up
is short.

Ends: sealed (the reply is final), asked (paused for the user; `resume` goes on from the events, so
an answer works even after a restart), revised (the previous reply was edited in place), stopped
(stop, disconnect, runaway loop, empty answer) or error (the model failed): the last two keep what
was streamed as an unsealed draft.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID, uuid4

from domain import events as ev
from domain.application import Changji
from domain.errors import TurnStateError
from domain.ports import ChatModel, ChatResult, ModelCallError, ToolCall
from domain.turning import Round
from domain.values import NodeView
from engine.tools import ENGINE_RULES, MAX_ROUNDS, TOOLS
from projections.context import Context

log = logging.getLogger(__name__)
DONE = "done"
# a model call still out after this long leaves the loop idle: the read models fold the turn's saves
# meanwhile (a quick call streams on the loop and would only compete; the turn's end folds the rest)
FOLD_WHILE_WAITING = 0.05


@dataclass(frozen=True, slots=True)
class TurnEvent:
    kind: str  # turn | delta | tool | ask | sealed | revised | stopped | error | done
    data: dict[str, Any]


class TurnHost(Protocol):
    """What the loop needs from the running service."""

    app: Changji

    async def write(self, fn: Callable[..., Any], *args: Any) -> Any: ...
    async def command(self, fn: Callable[..., Any], *args: Any) -> Any: ...
    async def load(self, fn: Callable[..., Any], *args: Any) -> Any: ...
    async def sync(self, position: int | None = None) -> int: ...
    def sync_soon(self, position: int) -> None: ...
    def fold_now(self, position: int) -> int: ...
    def context(self, tenant_id: str, story_id: UUID, at: UUID | None) -> Context: ...


@dataclass(frozen=True, slots=True)
class Opened:
    """A turn opened in one command: the empty reply, the notification position of the
    opening's last event, and the context at the user's node (None if assembling it failed: the turn
    then assembles it again and records the failure as its error)."""

    reply: NodeView
    position: int
    context: Context | None


@dataclass
class TurnHandle:
    reply_id: UUID
    events: asyncio.Queue[TurnEvent]
    task: asyncio.Task[NodeView] = field(init=False)
    stop_reason: str = "stopped"
    finished: bool = False  # DONE was emitted
    late_stop: asyncio.Future[Any] | None = None  # the stop recorded for a turn cancelled before it ran
    calling_since: float | None = None  # perf_counter() while a model call is in flight


class TurnRunner:
    def __init__(self, host: TurnHost, model: ChatModel, max_rounds: int = MAX_ROUNDS) -> None:
        self.host, self.model, self.max_rounds = host, model, max_rounds
        self.running: dict[UUID, TurnHandle] = {}

    async def open(
        self, tenant_id: str, story_id: UUID, text: str, parent_id: UUID | None, expected_version: int | None = None
    ) -> Opened:
        """The user's words and an empty reply under them (one transaction), and the context the model
        will get, in one command; `start` runs the turn."""
        app, model = self.host.app, self.model.model

        def opening() -> Opened:
            _, reply, position = app.open_turn(
                tenant_id, story_id, uuid4(), uuid4(), text, parent_id, model, expected_version
            )
            return self._opened(tenant_id, story_id, reply, position)

        opened: Opened = await self.host.command(opening)
        return opened

    async def reopen(self, tenant_id: str, story_id: UUID, user_id: UUID | None) -> Opened:
        """Regenerate: a new empty reply beside the others under a user node, opened like `open`."""
        app, model = self.host.app, self.model.model

        def reopening() -> Opened:
            _, reply, position = app.reopen_turn(tenant_id, story_id, uuid4(), user_id, model)
            return self._opened(tenant_id, story_id, reply, position)

        opened: Opened = await self.host.command(reopening)
        return opened

    def _opened(self, tenant_id: str, story_id: UUID, reply: NodeView, position: int) -> Opened:
        """In the opening's command, right after its transaction: the context at the user's node."""
        try:
            context = self.host.context(tenant_id, story_id, reply.parent_id)
        except Exception:  # the reply is saved already: the turn tries again and ends as an error
            context = None
        return Opened(reply, position, context)

    def start(
        self,
        tenant_id: str,
        story_id: UUID,
        reply_id: UUID,
        answer: str | None = None,
        opened: Opened | None = None,
    ) -> TurnHandle:
        """Run (or, with `answer`, resume) a turn as a task, registered at once so a stop always finds it.
        `opened` (from `open`/`reopen`) spares the task loading the reply and its context again."""
        existing = self.running.get(reply_id)
        if existing is not None and not existing.task.done():
            raise TurnStateError("a turn is already running for this reply", field="node_id")
        handle = TurnHandle(reply_id, asyncio.Queue())
        handle.task = asyncio.create_task(self._run(handle, tenant_id, story_id, answer, opened))
        self.running[reply_id] = handle
        handle.task.add_done_callback(lambda task: self._finished(handle, task))
        return handle

    def _finished(self, handle: TurnHandle, task: asyncio.Task[NodeView]) -> None:
        self.running.pop(handle.reply_id, None)
        if not handle.finished:  # cancelled before it ever ran: record the stop, and end the stream
            write = self.host.write(self.host.app.fail_turn, handle.reply_id, handle.stop_reason, "", "")
            handle.late_stop = asyncio.ensure_future(write)
            handle.events.put_nowait(TurnEvent("stopped", {"reason": handle.stop_reason}))
            handle.events.put_nowait(TurnEvent(DONE, {}))

    def stop(self, reply_id: UUID, reason: str = "stopped") -> bool:
        handle = self.running.get(reply_id)
        if handle is None or handle.task.done():
            return False
        handle.stop_reason = reason
        handle.task.cancel()
        return True

    async def _run(
        self, handle: TurnHandle, tenant_id: str, story_id: UUID, answer: str | None, opened: Opened | None
    ) -> NodeView:
        emit = handle.events.put_nowait
        preview: list[str] = []
        try:
            resume: list[dict[str, Any]] = []
            if answer is not None:  # the ask call and its answer go back to the model as a tool result,
                # with the draft as it stands (earlier rounds live on in the draft itself)
                try:
                    ask, reply = await self.host.write(self.host.app.answer_ask, tenant_id, handle.reply_id, answer)
                except TurnStateError as refused:  # answered meanwhile by someone else: leave that turn be
                    emit(TurnEvent("error", {"outcome": "conflict", "detail": str(refused)}))
                    return await self.host.load(self.host.app.node, handle.reply_id)  # type: ignore[no-any-return]
                resume = _answered(ask, answer, reply)
            elif opened is not None:
                reply = opened.reply
            else:
                reply = await self.host.load(self.host.app.node, handle.reply_id)
            emit(
                TurnEvent(
                    "turn", {"reply_id": str(reply.id), "user_id": str(reply.parent_id), "model": self.model.model}
                )
            )
            context = opened.context if opened is not None and answer is None else None
            if context is None:
                context = await self.host.load(self.host.context, tenant_id, story_id, reply.parent_id)
            messages = _opening(context) + resume
            saved = opened.position if opened is not None else None  # for the read models to fold while waiting
            for round_no in range(1, self.max_rounds + 2):
                preview.clear()
                result, elapsed = await self._call(handle, messages, round_no <= self.max_rounds, preview, emit, saved)
                played: Round = await self.host.command(
                    self._play_round, handle.reply_id, result, elapsed, round_no <= self.max_rounds
                )
                for outcome in played.outcomes:
                    emit(TurnEvent("tool", {"name": outcome.name, "ok": outcome.ok, "result": outcome.content}))
                if played.ends is not None:
                    await self.host.sync(played.position)  # the client's next read sees the whole turn
                    return self._ended(played, emit)
                messages += [_assistant(result.text, result.tool_calls), *_tool_results(played)]
                saved = played.position
            raise AssertionError("the last round runs without tools and always ends the turn")
        except ModelCallError as failure:
            view: NodeView = await self.host.write(
                self.host.app.fail_turn, handle.reply_id, "error", f"{failure.outcome}: {failure}", "".join(preview),
                (failure.outcome, failure.elapsed_ms),
            )  # fmt: skip
            emit(
                TurnEvent(
                    "error", {"outcome": failure.outcome, "detail": str(failure), "draft_version": view.draft_version}
                )
            )
            return view
        except Exception as failure:  # a bug or a broken store: the turn ends as an error, the draft is kept
            log.exception("turn %s failed", handle.reply_id)
            view = await self.host.write(
                self.host.app.fail_turn, handle.reply_id, "error", repr(failure), "".join(preview)
            )
            emit(TurnEvent("error", {"outcome": "internal", "detail": "the engine failed; the draft was kept"}))
            return view
        except asyncio.CancelledError:
            since = handle.calling_since
            call = (handle.stop_reason, (time.perf_counter() - since) * 1000) if since is not None else None
            view = await self.host.write(
                self.host.app.fail_turn, handle.reply_id, handle.stop_reason, "", "".join(preview), call
            )
            emit(TurnEvent("stopped", {"reason": handle.stop_reason, "draft_version": view.draft_version}))
            raise
        finally:
            handle.finished = True
            emit(TurnEvent(DONE, {}))

    def _play_round(self, reply_id: UUID, result: ChatResult, elapsed: float, tools_allowed: bool) -> Round:
        """One command: record a round and, if it ends the turn, fold it into the read models
        right there, before the loop hears of it (the turn answers only once they show it)."""
        played = self.host.app.play_round(reply_id, result, elapsed, tools_allowed)
        if played.ends is not None:
            try:
                self.host.fold_now(played.position)
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
    ) -> tuple[Any, float]:
        """One model call. `saved`: the position of the turn's last save, which the read models fold
        in the background if the call is still out after FOLD_WHILE_WAITING."""

        def on_text(delta: str) -> None:
            preview.append(delta)
            emit(TurnEvent("delta", {"text": delta}))

        loop = asyncio.get_running_loop()
        fold = loop.call_later(FOLD_WHILE_WAITING, self.host.sync_soon, saved) if saved is not None else None
        start = handle.calling_since = time.perf_counter()
        try:
            result = await self.model.chat(messages, TOOLS if with_tools else None, on_text=on_text)
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
            assert played.ask is not None
            ask_id, question, options = played.ask
            emit(
                TurnEvent(
                    "ask", {"reply_id": str(reply.id), "ask_id": ask_id, "question": question, "options": options}
                )
            )
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
    return [{"role": "system", "content": f"{system.content}\n\n{ENGINE_RULES}"}] + [
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


def _answered(ask: ev.TurnAsked, answer: str, reply: NodeView) -> list[dict[str, Any]]:
    arguments = json.dumps({"question": ask.question, "options": ask.options}, ensure_ascii=False)
    draft = f"当前稿件（v{reply.draft_version}）：\n{reply.text}" if reply.text else "稿纸还是空的（v0）。"
    return [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": ask.ask_id, "type": "function", "function": {"name": "ask", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": ask.ask_id, "content": f"用户已作答：「{answer}」。{draft}"},
    ]  # fmt: skip
