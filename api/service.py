"""The running service: the domain application, read models and their runner, behind async calls.

Threads: every event-store call (commands and node loads) runs on one `writer` thread, so cached
aggregates are never touched by two threads; the read-model runner has its own thread (except that
the writer folds the last save of an engine turn itself, one catch-up at a time either way);
read-model queries use a small reader pool with one connection per thread. Nothing blocking runs on
the loop.

Read your writes: a command returns the notification id of its last event, and `command()` waits
until the read models have folded at least that far before answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import takewhile
from typing import Any, TypeVar
from uuid import UUID, uuid4

from api.auth import ServiceDB, hash_key
from api.checkpoints import LOG_LIMIT_BYTES, Checkpointer
from api.errors import BadRequestError
from api.settings import Settings
from domain.application import Changji
from domain.compacting import CompactionPlan
from domain.compaction import count_turns, uncovered
from domain.scene import PatchResult, Roster, SceneSnapshot, apply_patch, canonical_patch
from domain.values import NodeKind, NodeView
from engine.turns import TurnRunner
from projections.context import Context, RenderCache, WindowCache, assemble_context
from projections.path import project_path, walk_up
from projections.runner import INDEX_BATCH, ProjectionRunner
from projections.scenes import SceneAt
from projections.store import ReadModels
from providers.openai import OpenAIChat
from providers.tokens import default_counter
from schedulers.compactor import CompactWorker
from schedulers.jobs import JobPolicy, JobSystem
from schedulers.scribe import ScribeWorker

log = logging.getLogger(__name__)
T = TypeVar("T")
VISIBLE_BLOCKS = ("greeting", "verbatim", "user")
KEY_CACHE_SECONDS = 30.0
# the full-text index catches up this long after a fold, in the background (a search does at once):
# turns in quick succession then share one indexing transaction, and none waits for it
INDEX_DELAY = 1.0
CHECKPOINT_SECONDS = 1.0  # how often the write-ahead logs are looked at (see api/checkpoints.py)


class Service:
    def __init__(self, settings: Settings, background_checkpoints: bool = True) -> None:
        """`background_checkpoints`: once started, checkpoint the SQLite logs on a thread of their own
        rather than inside whichever commit crosses the threshold (`api/checkpoints.py`). One-shot
        CLI commands that never `start()` pass False and keep SQLite's automatic checkpoints."""
        self.settings = settings
        env = settings.event_store_env()
        self.checkpointer: Checkpointer | None = None
        if settings.persistence == "sqlite":
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            if background_checkpoints:
                env["SQLITE_WAL_AUTOCHECKPOINT"] = "0"
                self.checkpointer = Checkpointer([env["SQLITE_DBNAME"], settings.read_models_path])
        self.app = Changji(env=env)
        self.store = ReadModels(settings.read_models_path, LOG_LIMIT_BYTES if self.checkpointer else None)
        self.runner = ProjectionRunner(self.app, self.store)
        self.service_db = ServiceDB(settings.service_db_path)
        self.counter = default_counter()
        self.renders = RenderCache(self.counter)
        self.windows = WindowCache()
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="changji-writer")
        self._projector = ThreadPoolExecutor(1, thread_name_prefix="changji-projector")
        self._readers = ThreadPoolExecutor(2, thread_name_prefix="changji-reader")
        self._checkpointing = ThreadPoolExecutor(1, thread_name_prefix="changji-checkpoint")
        self._checkpoints: asyncio.Task[None] | None = None
        self._poller: asyncio.Task[None] | None = None
        self._catch_up: asyncio.Future[int] | None = None
        self._tenants: dict[str, tuple[str, float]] = {}
        self.main_model = OpenAIChat(settings.main_model.endpoint()) if settings.main_model.configured else None
        self.turns = TurnRunner(self, self.main_model, settings.max_rounds) if self.main_model else None
        self.side_model = OpenAIChat(settings.side_model.endpoint()) if settings.side_model.configured else None
        policy = JobPolicy(
            sweep_seconds=settings.job_sweep_seconds,
            retry_seconds=settings.job_retry_seconds,
            max_attempts=settings.job_max_attempts,
            concurrency=settings.job_concurrency,
        )
        self.compactor = CompactWorker(self, self.side_model)
        workers = [ScribeWorker(self, self.side_model, settings.scribe_language), self.compactor]
        self.jobs = JobSystem(self, workers, policy)
        self._jobs_seen = 0
        self._indexer: asyncio.Task[None] | None = None
        self._writing = threading.Lock()  # held by whichever thread runs a domain command
        self._queued = 0  # commands handed to the writer thread and not yet finished
        # see `command`: not where every commit waits for the disk
        self.inline_commands = settings.persistence == "memory" or settings.sqlite_synchronous == "NORMAL"
        self._index_due, self._index_seen, self._closing = False, 0, False

    # --- threads ------------------------------------------------------------------------------

    async def _run(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, functools.partial(fn, *args, **kwargs))

    async def write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a domain command; answer only once the read models show its events.

        Commands return their notification position (alone, last in a tuple, or as `.position`);
        for one that does not, the read models catch up with everything committed so far."""
        result = await self._on_writer(fn, *args, **kwargs)
        position = result[-1] if isinstance(result, tuple) else getattr(result, "position", result)
        if isinstance(position, int):
            await self.sync(position)
        else:
            await self._run(self._projector, self.runner.catch_up)
        return result

    async def command(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a domain command without waiting for the read models: the turn engine's (open a turn,
        record a round), which read back only from the event store and sync before they answer.

        When no other command is running or queued, it runs right here on the event loop instead of
        on the writer thread: a hop to a thread and back costs 0.2–0.35 ms on small virtual machines
        (the sleeping core has to be woken twice), about as much as the command itself, and a turn
        makes one per round. These commands are short (a transaction of a few events, and at the
        opening the context, which is incremental); commands of any other kind keep to the thread."""
        if self.inline_commands and self._queued == 0 and self._writing.acquire(blocking=False):
            try:
                return fn(*args, **kwargs)
            finally:
                self._writing.release()
        return await self._on_writer(fn, *args, **kwargs)

    async def load(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a domain query (aggregate loads) on the writer thread."""
        return await self._on_writer(fn, *args, **kwargs)

    async def _on_writer(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """On the writer thread, holding `_writing` (which a command run on the loop holds too): the
        domain objects are only ever touched by one thread at a time."""

        def locked() -> T:
            with self._writing:
                return fn(*args, **kwargs)

        self._queued += 1  # only ever changed on the event loop
        try:
            return await self._run(self._writer, locked)
        finally:
            self._queued -= 1

    async def query(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a read-model query on a reader thread."""
        return await self._run(self._readers, fn, *args, **kwargs)

    async def sync(self, position: int | None = None) -> int:
        """Catch the read models up (to at least `position`). Concurrent callers share one catch-up."""
        while position is None or self.runner.position < position:
            await asyncio.shield(self._fold())
            if position is None:
                break
        if self.runner.position != self._index_seen:  # new texts, perhaps: index them in a while
            self._index_seen = self.runner.position
            self._index_later()
        added = sum(self.store.jobs_added[kind] for kind in self.jobs.eager_kinds)
        if added != self._jobs_seen:  # new work a worker can do: sweep now, not at the next tick
            self._jobs_seen = added
            self.jobs.kick()
        return self.runner.position

    def sync_soon(self, position: int) -> None:
        """Start catching the read models up to `position` without waiting (a turn calls it once its
        model request is on its way); a later `sync()` shares the catch-up in flight."""
        if self.runner.position < position:
            self._fold()

    async def searchable(self) -> None:
        """Bring the full-text index up to date with the read models (so with every write that
        returned): a search calls it first. A batch per hop to the projector thread, so folds (and
        the writes waiting on them) go on in between."""
        while await self._run(self._projector, self.runner.index_search, INDEX_BATCH) == INDEX_BATCH:
            pass

    def _index_later(self) -> None:
        self._index_due = True
        if self._closing:
            return
        if self._indexer is None or self._indexer.done():
            self._indexer = asyncio.ensure_future(self._index_in_background())

    async def _index_in_background(self) -> None:
        """Index the texts folded since the last time, INDEX_DELAY after a fold, a batch per hop to the
        projector thread (folds go on in between); again if more were folded meanwhile."""
        while self._index_due:
            await asyncio.sleep(INDEX_DELAY)
            self._index_due = False
            try:
                await self.searchable()
            except Exception:
                log.exception("full-text indexing failed; it is tried again after the next fold or search")

    def fold_now(self, position: int) -> int:
        """Catch the read models up to `position` on the calling thread, right after the last save of
        a turn, so the turn's answer needs no hop to the projector thread. If the projector is folding
        just then, this does not wait for it (the caller may be the event loop): the turn's `sync()`
        then shares that catch-up."""
        return self.runner.catch_up(position, wait=False)

    def _fold(self) -> asyncio.Future[int]:
        """The catch-up in flight on the projector thread, or a new one."""
        if self._catch_up is None or self._catch_up.done():
            self._catch_up = asyncio.get_running_loop().run_in_executor(self._projector, self.runner.catch_up)
            self._catch_up.add_done_callback(self._caught_up)
        return self._catch_up

    def _caught_up(self, future: asyncio.Future[int]) -> None:
        if self._catch_up is future:
            self._catch_up = None
        if not future.cancelled():
            future.exception()  # retrieved here: a catch-up nobody waited for fails quietly; the next retries

    async def authenticate(self, key: str) -> str | None:
        """The tenant of an API key. Known keys are remembered for KEY_CACHE_SECONDS, so a key revoked
        from the CLI stops working within that time."""
        digest = hash_key(key)
        now = time.monotonic()
        hit = self._tenants.get(digest)
        if hit is not None and hit[1] > now:
            return hit[0]
        tenant = await self.query(self.service_db.tenant_for, key)
        if tenant is not None:
            self._tenants[digest] = (tenant, now + KEY_CACHE_SECONDS)
        else:
            self._tenants.pop(digest, None)
        return tenant

    # --- composite calls (run on the writer thread) -------------------------------------------

    def append(
        self, tenant_id: str, story_id: UUID, kind: NodeKind, text: str, parent_id: UUID | None, expected: int | None
    ) -> tuple[NodeView, int, int]:
        """Append a node; returns its view, the story's new version and the notification position."""
        node, position = self.app.append_node(tenant_id, story_id, uuid4(), kind, text, parent_id, expected)
        return node, self.app.story(tenant_id, story_id).version, position

    def context(self, tenant_id: str, story_id: UUID, at: UUID | None) -> Context:
        story = self.app.story(tenant_id, story_id)
        assert story.leaf_id is not None
        leaf = self.app.story_node(story, at or story.leaf_id, "at").id
        card = self.app.card_of(story)
        upward = walk_up(self.app.node, leaf)
        settings, epoch = self.app.settings(story), self.app.render_epoch(story.id)
        scene = self.scene_of(leaf)
        summarized = self.store.has_summaries(story.id)
        ctx = assemble_context(
            card.data, settings, upward, self.renders, self.windows, epoch, scene, self.app.node, summarized
        )
        if ctx.cut_turns:
            self._schedule_pack(leaf)
        return ctx

    def _schedule_pack(self, leaf: UUID) -> None:
        """The context overflowed its budget: if there is something to pack, a compaction is announced on
        the leaf's reply (once while one is pending); the cut itself applies to this request only."""
        node = self.app.node(leaf)
        reply = node if node.kind == "reply" else self.app.node(node.parent_id) if node.parent_id else None
        if reply is None or reply.kind != "reply" or self.app.compaction_under_way(reply.id):
            return
        settings = self.app.settings(self.app.story_of(reply))
        below, _ = uncovered(walk_up(self.app.node, reply.id), settings.keep_turns + 1)  # bounded: enough to say
        if count_turns(below) <= settings.keep_turns:  # nothing beyond the kept turns to pack
            return
        try:
            self.app.schedule_compaction(reply.id, "budget")
        except Exception:  # never fail a read for it
            log.exception("could not schedule a compaction for %s", reply.id)

    def summaries(self, tenant_id: str, story_id: UUID, at: UUID | None) -> tuple[NodeView, CompactionPlan]:
        """The summary layers on the path to a node of the story (default: the leaf)."""
        story = self.app.story(tenant_id, story_id)
        assert story.leaf_id is not None
        node = self.app.story_node(story, at or story.leaf_id, "at").view
        return node, self.app.plan_compaction(node.id)

    def scene_of(self, node_id: UUID) -> SceneAt | None:
        """The scene at a node, also right after a write the read models have not folded yet."""
        return self.store.scene_on_path(n.id for n in walk_up(self.app.node, node_id))

    def edit_scene(
        self, tenant_id: str, story_id: UUID, at: UUID | None, patch: dict[str, Any]
    ) -> tuple[NodeView, PatchResult, int]:
        """A user's patch to the scene at a node, merged by the scribe's rules: refused whole (422) when
        nothing in it applies, otherwise recorded with the warnings for the parts that did not."""
        story = self.app.story(tenant_id, story_id)
        node = self.app.scene_target(tenant_id, story_id, at)
        scene = self.scene_of(node.id)
        snapshot, roster = (scene.snapshot, scene.roster) if scene else (SceneSnapshot(), Roster())
        names = [self.app.card_of(story).data.name, self.app.settings(story).user_name]
        known = [*names, *snapshot.characters, *roster.characters]
        patch = canonical_patch(patch, known)
        merged = apply_patch(snapshot, roster, patch, known, allow_roster=True)
        if not merged.applied:
            detail = "; ".join(merged.warnings) or "the patch is empty"
            raise BadRequestError(422, f"nothing in the patch could be applied: {detail}", "body.patch")
        view, position = self.app.edit_scene(tenant_id, story_id, node.id, patch, merged.warnings)
        return view, merged, position

    def path(self, tenant_id: str, story_id: UUID, at: UUID | None, limit: int | None) -> list[NodeView]:
        story = self.app.story(tenant_id, story_id)
        assert story.leaf_id is not None
        leaf = self.app.story_node(story, at or story.leaf_id, "at").id
        return project_path(self.app.node, leaf, limit)

    def replay(
        self, tenant_id: str, story_id: UUID, at: UUID | None, from_depth: int, limit: int
    ) -> tuple[UUID, list[dict[str, Any]], int | None]:
        """The path's node events in order (depths from_depth…), each with the context after that step."""
        story = self.app.story(tenant_id, story_id)
        assert story.leaf_id is not None
        end = self.app.story_node(story, at or story.leaf_id, "at").view
        steps = list(takewhile(lambda n: n.depth >= from_depth, walk_up(self.app.node, end.id)))
        steps = steps[::-1][:limit]
        card = self.app.card_of(story).data
        settings, epoch = self.app.settings(story), self.app.render_epoch(story.id)
        out = []
        for node in steps:  # each step's window extends the one before: a page costs about one walk
            upward = walk_up(self.app.node, node.id)
            scene = self.scene_of(node.id)
            summarized = self.store.has_summaries(story.id)
            ctx = assemble_context(
                card, settings, upward, self.renders, self.windows, epoch, scene, self.app.node, summarized
            )
            out.append(
                {
                    "node_id": node.id, "kind": node.kind, "depth": node.depth, "turn": node.turn,
                    "events": [event_record(e) for e in self.app.events_of(node.id)],
                    "context_messages": len(ctx.messages), "context_tokens": ctx.tokens,
                    "visible_nodes": sum(len(b.node_ids) for b in ctx.explain if b.what in VISIBLE_BLOCKS),
                }
            )  # fmt: skip
        more = steps[-1].depth + 1 if steps and steps[-1].depth < end.depth else None
        return end.id, out, more

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self.checkpointer is not None:  # first: the first catch-up may fold the whole log
            self._checkpoints = asyncio.create_task(self._checkpoint_logs(self.checkpointer))
        await self.sync()
        self._poller = asyncio.create_task(self._poll())
        self.jobs.start()

    async def _checkpoint_logs(self, checkpointer: Checkpointer) -> None:
        while True:
            await asyncio.sleep(CHECKPOINT_SECONDS)
            try:
                await self._run(self._checkpointing, checkpointer.run)
            except Exception:
                log.exception("checkpoint failed; trying again in %s s", CHECKPOINT_SECONDS)

    async def _poll(self) -> None:
        """Fold events written by other processes (CLI, other workers)."""
        while True:
            await asyncio.sleep(self.settings.poll_interval)
            try:
                await self.sync()
            except Exception:
                log.exception("read-model catch-up failed; retrying at the next poll")

    async def close(self) -> None:
        self._closing = True  # no background indexing starts from here on
        await self.jobs.stop()
        for task in (self._poller, self._indexer, self._checkpoints):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for handle in list(self.turns.running.values()) if self.turns else []:
            handle.stop_reason = "shutdown"
            handle.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await handle.task
            await asyncio.sleep(0)  # let the task's done-callback record a stop it never got to
            if handle.late_stop is not None:
                with contextlib.suppress(Exception):
                    await handle.late_stop
        for model in (self.main_model, self.side_model):
            if model is not None:
                await model.close()
        for pool in (self._writer, self._projector, self._readers, self._checkpointing):
            pool.shutdown(wait=True)
        if self.checkpointer is not None:
            self.checkpointer.close()
        self.app.close()
        self.service_db.close()


def event_record(event: Any) -> dict[str, Any]:
    """A stored event as plain data: its type, position in its aggregate, and its own fields."""
    skip = {"originator_id", "originator_version", "timestamp", "originator_topic"}
    return {
        "type": type(event).__name__,
        "originator_id": event.originator_id,
        "version": event.originator_version,
        "timestamp": event.timestamp,
        "data": {k: v for k, v in vars(event).items() if k not in skip},
    }
