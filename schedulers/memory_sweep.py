"""The card memories kept up with their stories in the background, by the lead process: a sweep every few
seconds reads from the read models what is due, and syncs each card that has work (`service/card_memory.py`).

A story is recapped once it changed since its recap and either `recap_quiet_minutes` passed since its
last change or `recap_turns` turns were played since the turn its recap read (its settings: a story being
played is not recapped every turn). A deleted story is forgotten, a restored one remembered, and a memory
that changed since its last merge is merged, at the next sweep.

Nothing is held only in memory: what is due is derived from the events each sweep, and a sync does only
what the events say is still to do (a recap is written once per fingerprint of the path it read), so a
crash or a stop between a recap and its merge loses nothing — the next sweep merges. What the sweep does
remember, in this process, is the stories and memories it found nothing to do for at their last change,
so it does not look at them again until they change."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from uuid import UUID

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from domain.application import Changji
from domain.errors import NotFoundError
from domain.values import StorySettings
from projections.read_models.store import ReadModels
from service.card_memory import CardMemoryKeeper
from service.executor import Executor
from service.read_side import ReadSide

log = logging.getLogger(__name__)
SWEEP = "changji-card-memory"
ROWS = 1000  # candidates read per sweep
LOOKED = 100_000  # stories and memories remembered as looked at (the oldest forgotten past it)


class MemorySweep:
    def __init__(
        self,
        app: Changji,
        store: ReadModels,
        executor: Executor,
        read_side: ReadSide,
        keeper: CardMemoryKeeper,
        seconds: float = 30.0,
    ) -> None:
        self.app, self.store, self.executor, self.read_side, self.keeper = app, store, executor, read_side, keeper
        self.seconds = seconds
        self.scheduler: AsyncIOScheduler | None = None
        self._looked: dict[str, str] = {}  # story id → its `updated_at` when a sync found nothing to do
        self._merges_looked: dict[str, int] = {}  # card id → its memory's `changed_seq` then
        self._forgets_looked: dict[str, int] = {}  # `<card id>:<story id>` → its recap row's `seq` then
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        """Sweep every `seconds` (again after a stop: a process that loses the lead and takes it up again)."""
        self._stopping = False
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.scheduler.add_job(
            self.sweep, "interval", seconds=self.seconds, id=SWEEP, max_instances=1, coalesce=True,
            misfire_grace_time=None, next_run_time=datetime.now(UTC) + timedelta(seconds=min(self.seconds, 5.0)),
        )  # fmt: skip
        self.scheduler.start()

    async def stop(self) -> None:
        """Stop sweeping, and cancel a sweep in flight (what it had not recorded is still due)."""
        self._stopping = True
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def sweep(self) -> None:
        if self._stopping:
            return
        self._task = asyncio.current_task()
        try:
            await self.sweep_once()
        except asyncio.CancelledError:
            if not self._stopping:
                raise
        except Exception:
            log.exception("card memory sweep failed; trying again at the next sweep")
        finally:
            self._task = None

    async def sweep_once(self, now: datetime | None = None) -> int:
        """Sync every card that has work due now; the number of cards synced."""
        await self.read_side.sync()
        now = now or datetime.now(UTC)
        due: defaultdict[tuple[str, UUID], set[UUID]] = defaultdict(set)
        looked: dict[UUID, str] = {}
        after = 0
        while rows := await self.executor.query(self.store.stories_to_recap, after, ROWS):
            after = int(rows[-1]["seq"])
            for row in rows:
                if self._looked.get(row["story_id"]) == row["updated_at"]:
                    continue
                settings = await self.executor.load(self._settings, row["tenant_id"], UUID(row["story_id"]))
                if settings is None or not settings.card_memory:
                    self._look(row["story_id"], row["updated_at"])
                    continue
                quiet = now - datetime.fromisoformat(row["updated_at"]) >= timedelta(
                    minutes=settings.recap_quiet_minutes
                )
                played = int(row["leaf_turn"]) - int(row["recap_turns"] or 0) >= settings.recap_turns
                if quiet or played:
                    due[(row["tenant_id"], UUID(row["card_id"]))].add(UUID(row["story_id"]))
                    looked[UUID(row["story_id"])] = row["updated_at"]
            if len(rows) < ROWS:
                break
        forgetting: dict[str, int] = {}
        for row in await self.executor.query(self.store.stories_to_forget, ROWS):
            key = f"{row['card_id']}:{row['story_id']}"
            if self._forgets_looked.get(key) != row["seq"]:
                due[(row["tenant_id"], UUID(row["card_id"]))]
                forgetting[key] = int(row["seq"])
        merges: dict[str, int] = {}
        for row in await self.executor.query(self.store.memories_to_merge, ROWS):
            if self._merges_looked.get(row["card_id"]) != row["changed_seq"]:
                due[(row["tenant_id"], UUID(row["card_id"]))]
                merges[row["card_id"]] = int(row["changed_seq"])
        for (tenant_id, card_id), stories in due.items():
            if self._stopping:
                break
            try:
                await self.keeper.sync(tenant_id, card_id, only=stories)
            except asyncio.CancelledError:
                raise
            except Exception:  # (looked at: tried again once the story or the memory changes)
                log.exception("could not bring the memory of card %s up to date", card_id)
            for story_id in stories:
                self._look(str(story_id), looked[story_id])
            if str(card_id) in merges:
                self._merges_looked[str(card_id)] = merges[str(card_id)]
            for key, seq in forgetting.items():
                if key.startswith(f"{card_id}:"):
                    self._forgets_looked[key] = seq
        return len(due)

    def _settings(self, tenant_id: str, story_id: UUID) -> StorySettings | None:
        try:
            return self.app.settings(self.app.story(tenant_id, story_id))
        except NotFoundError:
            return None

    def _look(self, story_id: str, updated_at: str) -> None:
        self._looked[story_id] = updated_at
        if len(self._looked) > LOOKED:
            del self._looked[next(iter(self._looked))]
