"""The main model's `memory_search`, as the running service answers it: the query embedded on the
event loop (never on the writer thread), then the story's recall index searched on the path of the
reply being written (`StoryViews.memory_at`). A story without an index yet (none built since the
start) gets one first, waited for at most `build_seconds`; otherwise the index is used as it stands."""

from __future__ import annotations

import asyncio
import contextlib
from uuid import UUID

from domain.values import Recollection
from service.executor import Executor
from service.recall import Recall
from service.views import StoryViews


class MemorySearch:
    def __init__(self, executor: Executor, views: StoryViews, recall: Recall, build_seconds: float = 5.0) -> None:
        self.executor, self.views, self.recall, self.build_seconds = executor, views, recall, build_seconds

    async def __call__(self, tenant_id: str, story_id: UUID, reply_id: UUID, query: str, k: int) -> list[Recollection]:
        if self.recall.index(story_id) is None:
            with contextlib.suppress(TimeoutError):  # (giving up leaves the build to finish for the others)
                await asyncio.wait_for(self.recall.refresh(story_id, all_vectors=False), self.build_seconds)
        await self.recall.prepare(story_id, query)
        return await self.executor.load(self.views.memory_at, tenant_id, story_id, reply_id, query, k)
