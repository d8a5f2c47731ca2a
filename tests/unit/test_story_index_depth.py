"""How deep a story's index reads its rankings: deeper only where the path filter cut a ranking short, never
because a rare word has few passages to give (each round repeats the dense search)."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import numpy as np

from projections.recall.story_index import CANDIDATES, StoryIndex
from projections.recall.vectors import VectorIndex


def rows(texts: list[str]) -> list[dict[str, Any]]:
    out = []
    for depth, text in enumerate(texts):
        node = str(uuid4())
        out.append({
            "id": f"{node}:0", "node_id": node, "user_id": str(uuid4()), "depth": 2 * depth + 2, "turn": depth + 1,
            "first_turn": depth + 1, "text": text, "user_part": 0, "user_hidden": 0, "reply_hidden": 0, "seq": 1,
            "kind": "turn",
        })  # fmt: skip
    return out


def counted(index: StoryIndex) -> list[int]:
    """The `k` of each dense search the index makes."""
    assert index.vectors is not None
    asked: list[int] = []
    search = index.vectors.search

    def counting(query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        asked.append(k)
        return search(query, k, allowed)

    index.vectors.search = counting  # type: ignore[method-assign]
    return asked


def test_a_rare_word_is_searched_once_and_a_crowded_path_is_read_deeper() -> None:
    texts = [f"第{i}天，修窗户，擦玻璃。" for i in range(3000)]
    for i in (10, 500, 1500):
        texts[i] = f"第{i}天，找到了灯塔钥匙。"
    found = rows(texts)
    vectors = np.random.default_rng(7).standard_normal((len(found), 8)).astype(np.float32)
    index = StoryIndex(1, found, vectors)
    assert isinstance(index.vectors, VectorIndex)
    asked = counted(index)
    query = np.ones(8, dtype=np.float32)
    hits = index.search("灯塔钥匙", query, 30, 10_000, lambda _node: True)
    assert {h.row["text"] for h in hits if "钥匙" in h.row["text"]} == {texts[i] for i in (10, 500, 1500)}
    assert asked == [CANDIDATES]  # (the words' rankings hold all there is: no deeper round)

    asked.clear()
    odd = {row["node_id"] for row in found[1::2]} | {row["user_id"] for row in found[1::2]}
    hits = index.search("修窗户", query, 30, 10_000, lambda node: node in odd)  # half the path elsewhere
    assert len(hits) == 30 and asked[0] == CANDIDATES and len(asked) > 1
