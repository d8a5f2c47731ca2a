"""The turn loop (engine mode): turns started, stopped and found here; their rounds in `engine/rounds.py`.

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
import logging
import time
from collections.abc import Awaitable, Callable
from uuid import UUID, uuid4

from domain.application import Changji
from domain.errors import TurnStateError
from domain.ports import ChatModel
from domain.values import NodeView, StopReason
from engine.rounds import TurnLoop
from engine.tool_schemas import MAX_ROUNDS
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
from storage.stop_requests import LOOK_SECONDS, StopRequests

log = logging.getLogger(__name__)
STOP_ELSEWHERE_SECONDS = 3.0  # a stop asked of another process's turn is waited for this long


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
        rewrite: Callable[[str, NodeView], Awaitable[NodeView]] | None = None,
    ) -> None:
        """`open_on_loop`: the opening (which assembles the context) may run on the event loop when the
        writer is idle — not when the context embeds a recall query, which would hold the loop.
        `memory`: how the model's `memory_search` calls are answered (None: they are refused); `lore`:
        how its `lorebook_search` calls are.
        `prepare(story, words)`: embeds recall's query ahead, on the loop, where the context is assembled
        for words that were not just posted (a regenerate, a resumed turn). `stops`: where other processes
        serving the same data dir ask for a stop of a turn this one may be running (None: no others);
        `warm(story)`: whether the story's next context is quick to assemble (else it is assembled off the
        loop, whatever `open_on_loop` says); `rewrite(tenant, user node)`: the side model's search of the
        memory for the words, asked and noted on the node before the context is assembled
        (`service/search_rewrites.py`)."""
        self.app, self.runs, self.folds, self.context = app, runs, folds, context
        self.rewrite = rewrite
        self.model, self.max_rounds, self.open_on_loop = model, max_rounds, open_on_loop
        self.memory, self.prepare, self.lore, self.stops, self.warm = memory, prepare, lore, stops, warm
        self.loop = TurnLoop(app, runs, folds, context, model, max_rounds, memory, lore, self._prepare)
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
        await self._rewritten(tenant_id, opened.user)
        return await self._with_context(tenant_id, story_id, opened.reply, opened.position)

    async def _rewritten(self, tenant_id: str, user: NodeView) -> None:
        """The words' search of the memory noted before the context that recalls with it; nothing stops the
        turn (the reply is saved already: it must reach its run)."""
        if self.rewrite is None:
            return
        try:
            await self.rewrite(tenant_id, user)
        except Exception:
            log.exception("the side model's search for %s failed: the turn recalls by the words", user.id)

    async def reopen(self, tenant_id: str, story_id: UUID, user_id: UUID | None) -> Opened:
        """Regenerate: a new empty reply beside the others under a user node, opened like `open`."""
        await self._prepare(tenant_id, story_id, user_id)
        opened = await self.runs.command(
            self.app.turns.reopen_turn, tenant_id, story_id, uuid4(), user_id, self.model.model
        )
        await self._rewritten(tenant_id, opened.user)  # (words never asked about: a setting turned on since)
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
        handle.task = asyncio.create_task(self.loop.run(handle, tenant_id, story_id, answer, opened))
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
            try:
                asked = await asyncio.to_thread(self.stops.asked, list(self.running))
                for reply_id in asked:
                    await asyncio.to_thread(self.stops.clear, reply_id)
                    self.stop(reply_id, "stopped")
            except Exception:  # (a store that did not answer: looked at again in a moment)
                log.warning("the stops asked elsewhere could not be read; looking again", exc_info=True)

    async def stop_elsewhere(self, reply_id: UUID, seconds: float = STOP_ELSEWHERE_SECONDS) -> bool:
        """Ask whichever process runs the reply's turn to stop it (a turn not running here); whether it
        did within `seconds`: its reply stopped writing. False: no process runs it (one that ran it ended
        before the turn did) — the caller then records the stop itself."""
        if self.stops is None:
            return False
        await asyncio.to_thread(self.stops.ask, reply_id)
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                await asyncio.sleep(LOOK_SECONDS / 2)
                if (await self.runs.short_load(self.app.node, reply_id)).phase != "writing":
                    return True
            return False
        finally:
            await asyncio.to_thread(self.stops.clear, reply_id)

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
