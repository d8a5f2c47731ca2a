"""Helpers for the recall tests: a story's archive indexed now, what the context recalled, a counting embedder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal
from uuid import UUID

import numpy as np

from projections.context.records import Context
from projections.runner import ProjectionRunner
from providers.embedders import HashingEmbedder
from service.recall import Recall
from tests.builders import StoryBuilder

TIGHT = {
    "context_window": 600,
    "reply_reserve": 150,
    "pack_turns": 0,
    "recall_tokens": 150,
    "recall_share": 0,
    "keep_turns": 1,
}
FILLER = (
    "今天也在修灯塔的窗户，玻璃上全是盐霜，擦了一遍又一遍还是看不清外面的海。",
    "“窗框又松了，风一吹就响，明天得找几颗新钉子来，顺便把门轴也上点油。”",
)


def indexed(runner: ProjectionRunner, recall: Recall, story: StoryBuilder) -> None:
    runner.catch_up()
    recall.refresh_soon(story.story_id).result(timeout=30)


def recalled(ctx: Context) -> list[UUID]:
    return [n for b in ctx.explain if b.what == "recall" for n in b.node_ids]


def filler(story: StoryBuilder, turns: int) -> None:
    for _ in range(turns):
        story.turn(*FILLER)


class CountingEmbedder(HashingEmbedder):
    """A local embedder that counts the passages it encodes."""

    def __init__(self) -> None:
        super().__init__()
        self.passages = 0
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray:
        if purpose == "passage":
            self.passages += len(texts)
            self.texts += texts
        return super().encode(texts, purpose)


def everywhere(_node: str) -> bool:
    return True
