"""The turn loop (engine mode).

A turn runs as its own asyncio task and reports through a queue of `TurnEvent`s (text deltas, tool
activity, an ask, the seal, an error), which the HTTP layer streams as SSE or folds into one JSON
answer. Every model round is recorded by `app.turns.play_round` before the next one starts, so the
event store always holds the draft as far as it got.

Per turn, the engine's own time is kept off the model's path where it can be: `open`/`reopen` save
the user's words and the empty reply and assemble the context in one command; each round is one
command, and the last one folds the turn into the read models right after its save (read your
writes). Commands go through `Executor.command`, which runs them on the event loop itself when the
writer thread is idle (no thread hop). While a model call is slow to answer,
the read models fold what the turn saved so far in the background (`sync_soon`), so that catch-up
is short.

Ends: sealed (the reply is final), asked (paused for the user; `resume` goes on from the events, so
an answer works even after a restart), revised (the previous reply was edited in place), stopped
(stop, disconnect, runaway loop, empty answer) or error (the model failed): the last two keep what
was streamed as an unsealed draft.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar
from uuid import UUID, uuid4

from domain.application import Changji
from domain.errors import TurnStateError
from domain.language import Language
from domain.ports import ChatModel, ChatResult, ModelCallError, ToolCall
from domain.tree.commands.turns import Round
from domain.tree.draft_tools import TOOL_TEXTS, LoreFound, lore_request, memory_request
from domain.tree.turn_events import TurnAsked
from domain.values import NodeView, Recollection, StopReason
from engine.tool_schemas import ENGINE_RULES, MAX_ROUNDS, TOOLS
from engine.tool_stream import STREAMED_TOOLS, ContentStream
from projections.context.records import Context
from service.executor import W
from storage.stop_requests import LOOK_SECONDS, StopRequests

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")
DONE = "done"
# a model call still out after this long leaves the loop idle: the read models fold the turn's saves
# meanwhile (a quick call streams on the loop and would only compete; the turn's end folds the rest)
FOLD_WHILE_WAITING = 0.05
STOP_ELSEWHERE_SECONDS = 3.0  # a stop asked of another process's turn is waited for this long


@dataclass(frozen=True, slots=True)
class TurnEvent:
    kind: str  # turn | delta | tool | ask | sealed | revised | stopped | error | done
    data: dict[str, Any]


class Runs(Protocol):
    """Where the loop's domain calls run (the service's `Executor`)."""

    async def write(self, fn: Callable[P, W], *args: P.args, **kwargs: P.kwargs) -> W: ...
    async def command(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...
    async def load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...
    async def short_load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...


class Folds(Protocol):
    """How the loop keeps the read models up with what it saved (the service's `ReadSide`)."""

    async def sync(self, position: int | None = None) -> int: ...
    def sync_soon(self, position: int) -> None: ...
    def fold_now(self, position: int) -> int: ...


ContextAt = Callable[[str, UUID, UUID | None], Context]
"""(tenant, story, node) → the context for the next turn there (the service's `StoryViews.context`)."""
MemorySearch = Callable[[str, UUID, UUID, str, int], Awaitable[list[Recollection]]]
"""(tenant, story, the reply being written, query, k) → passages of the story's memory on its path
(the service's `service.memory.MemorySearch`)."""
LoreSearch = Callable[[str, UUID, UUID, str, int], list[LoreFound]]
"""(tenant, story, the reply being written, query, limit) → the card's lore entries for the query, as the
path to that reply sees them (the service's `StoryViews.lore_at`; it runs where commands run)."""


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
    tenant_id: str = ""
    story_id: UUID | None = None
    task: asyncio.Task[NodeView] = field(init=False)
    stop_reason: StopReason = "stopped"
    finished: bool = False  # DONE was emitted
    late_stop: asyncio.Future[Any] | None = None  # the stop recorded for a turn cancelled before it ran
    calling_since: float | None = None  # perf_counter() while a model call is in flight
    shown: str = ""  # the draft as the stream has shown it (as recorded when the turn began, then its deltas)


class TurnRunner:
    def __init__(
        self,
        app: Changji,
        runs: Runs,
        folds: Folds,
        context: ContextAt,
        model: ChatModel,
        max_rounds: int = MAX_ROUNDS,
        open_on_loop: bool = True,
        memory: MemorySearch | None = None,
        prepare: Callable[[UUID, str], Awaitable[None]] | None = None,
        lore: LoreSearch | None = None,
        stops: StopRequests | None = None,
        warm: Callable[[UUID], bool] | None = None,
    ) -> None:
        """`open_on_loop`: the opening (which assembles the context) may run on the event loop when the
        writer is idle — not when the context embeds a recall query, which would hold the loop.
        `memory`: how the model's `memory_search` calls are answered (None: they are refused); `lore`:
        how its `lorebook_search` calls are.
        `prepare(story, words)`: embeds recall's query ahead, on the loop, where the context is assembled
        for words that were not just posted (a regenerate, a resumed turn). `stops`: where other processes
        serving the same data dir ask for a stop of a turn this one may be running (None: no others);
        `warm(story)`: whether the story's next context is quick to assemble (else it is assembled off the
        loop, whatever `open_on_loop` says)."""
        self.app, self.runs, self.folds, self.context = app, runs, folds, context
        self.model, self.max_rounds, self.open_on_loop = model, max_rounds, open_on_loop
        self.memory, self.prepare, self.lore, self.stops, self.warm = memory, prepare, lore, stops, warm
        self.running: dict[UUID, TurnHandle] = {}
        self._watching: asyncio.Task[None] | None = None

    async def open(
        self, tenant_id: str, story_id: UUID, text: str, parent_id: UUID | None, expected_version: int | None = None
    ) -> Opened:
        """The user's words and an empty reply under them (one transaction), then the context the model
        will get (a read: other workers' commands need not wait for it); `start` runs the turn."""
        opened = await self.runs.command(
            self.app.turns.open_turn, tenant_id, story_id, uuid4(), uuid4(), text, parent_id, self.model.model,
            expected_version,
        )  # fmt: skip
        return await self._with_context(tenant_id, story_id, opened.reply, opened.position)

    async def reopen(self, tenant_id: str, story_id: UUID, user_id: UUID | None) -> Opened:
        """Regenerate: a new empty reply beside the others under a user node, opened like `open`."""
        await self._prepare(tenant_id, story_id, user_id)
        opened = await self.runs.command(
            self.app.turns.reopen_turn, tenant_id, story_id, uuid4(), user_id, self.model.model
        )
        return await self._with_context(tenant_id, story_id, opened.reply, opened.position)

    async def _with_context(self, tenant_id: str, story_id: UUID, reply: NodeView, position: int) -> Opened:
        here = self.open_on_loop and (self.warm is None or self.warm(story_id))
        load = self.runs.short_load if here else self.runs.load
        return await load(self._opened, tenant_id, story_id, reply, position)

    async def _prepare(self, tenant_id: str, story_id: UUID, node_id: UUID | None) -> None:
        """Embed the user's words a context at `node_id` (a user node, or the leaf's) recalls for."""
        if self.prepare is None:
            return
        try:
            words = await self.runs.load(self._words_at, tenant_id, story_id, node_id)
        except Exception:  # the command that follows reports it
            return
        if words:
            await self.prepare(story_id, words)

    def _words_at(self, tenant_id: str, story_id: UUID, node_id: UUID | None) -> str | None:
        story = self.app.story(tenant_id, story_id)
        at = node_id if node_id is not None else story.leaf_id
        if at is None:
            return None
        node = self.app.node(at)
        if node.kind == "reply" and node.parent_id is not None:
            node = self.app.node(node.parent_id)
        return node.text if node.kind == "user" and node.story_id == story.id else None

    def _opened(self, tenant_id: str, story_id: UUID, reply: NodeView, position: int) -> Opened:
        """Right after the opening's command: the context at the user's node."""
        try:
            context = self.context(tenant_id, story_id, reply.parent_id)
        except Exception:  # the reply is saved already: the turn tries again and ends as an error
            return Opened(reply, position, None)
        if context.cut_turns and reply.parent_id is not None:  # the path outgrew its budget: pack it
            try:
                position = max(position, self.app.compaction.schedule_budget_pack(reply.parent_id))
            except Exception:
                log.exception("could not schedule a compaction for %s", reply.parent_id)
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
        handle = TurnHandle(reply_id, asyncio.Queue(), tenant_id, story_id)
        handle.task = asyncio.create_task(self._run(handle, tenant_id, story_id, answer, opened))
        self.running[reply_id] = handle
        handle.task.add_done_callback(lambda task: self._finished(handle, task))
        if self.stops is not None and (self._watching is None or self._watching.done()):
            self._watching = asyncio.create_task(self._watch_stops())
        return handle

    async def _watch_stops(self) -> None:
        """While turns run here: stop those another process was asked to stop (`storage/stop_requests.py`)."""
        assert self.stops is not None
        while self.running:
            await asyncio.sleep(LOOK_SECONDS)
            for reply_id in self.stops.asked(list(self.running)):
                self.stops.clear(reply_id)
                self.stop(reply_id, "stopped")

    async def stop_elsewhere(self, reply_id: UUID, seconds: float = STOP_ELSEWHERE_SECONDS) -> bool:
        """Ask whichever process runs the reply's turn to stop it (a turn not running here); whether it
        did within `seconds`: its reply stopped writing. False: no process runs it (one that ran it ended
        before the turn did) — the caller then records the stop itself."""
        if self.stops is None:
            return False
        self.stops.ask(reply_id)
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                await asyncio.sleep(LOOK_SECONDS / 2)
                if (await self.runs.short_load(self.app.node, reply_id)).phase != "writing":
                    return True
            return False
        finally:
            self.stops.clear(reply_id)

    def _finished(self, handle: TurnHandle, task: asyncio.Task[NodeView]) -> None:
        self.running.pop(handle.reply_id, None)
        if not handle.finished:  # cancelled before it ever ran: record the stop, and end the stream
            write = self.runs.write(self.app.turns.fail_turn, handle.reply_id, handle.stop_reason, "", "")
            handle.late_stop = asyncio.ensure_future(write)
            handle.events.put_nowait(TurnEvent("stopped", {"reason": handle.stop_reason}))
            handle.events.put_nowait(TurnEvent(DONE, {}))

    def stop(self, reply_id: UUID, reason: StopReason = "stopped") -> bool:
        handle = self.running.get(reply_id)
        if handle is None or handle.task.done():
            return False
        handle.stop_reason = reason
        handle.task.cancel()
        return True

    async def stop_all(self) -> None:
        """Stop every running turn (shutdown): each records its stop, keeping what it wrote."""
        if self._watching is not None:
            self._watching.cancel()
        for handle in list(self.running.values()):
            handle.stop_reason = "shutdown"
            handle.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await handle.task
            await asyncio.sleep(0)  # let the task's done-callback record a stop it never got to
            if handle.late_stop is not None:
                with contextlib.suppress(Exception):
                    await handle.late_stop

    async def _run(
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
