"""Recall over a card's memory: what the card's earlier stories left, searched by the user's words.

Its passages are the handbook's items (each with the stories that support it) and the lines of the
remembered stories' recaps (each with its story), so a detail no merge kept in the handbook is still
found where its story's recap holds it. BM25 (`lexical.py`) over those few hundred passages; an index is
built per version of the memory, whole, in a few milliseconds."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from domain.memory.handbook import Handbook
from domain.memory.recaps import NONE, recap_sections
from projections.recall.lexical import LexicalIndex

LINE_CHARS = 400  # a recap line longer than this is cut into parts of it, at a sentence where there is one
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.、)])\s*")
_SENTENCE = re.compile(r"(?<=[。！？!?.])\s*")


@dataclass(frozen=True, slots=True)
class MemoryPassage:
    key: str  # the handbook item's id, or `<story id>:<line>` for a recap's line
    kind: Literal["item", "recap"]
    text: str
    sources: tuple[UUID, ...]


@dataclass(frozen=True, slots=True)
class MemoryHit:
    passage: MemoryPassage
    score: float


def memory_passages(
    handbook: Handbook, recaps: Mapping[UUID, str], forgotten: Collection[UUID] = ()
) -> list[MemoryPassage]:
    """The handbook's items (with the stories behind them, the `forgotten` ones aside: an item only they
    support is left out, even before the merge that takes it out lands), then each remembered recap's lines
    (the title and the headings aside)."""
    out = []
    for item in handbook.items:
        sources = tuple(s for s in item.sources if s not in forgotten)
        if sources:
            out.append(MemoryPassage(item.item_id, "item", item.text, sources))
    nothing = set(NONE.values())
    for story_id, recap in recaps.items():
        number = 0
        for body in recap_sections(recap).values():
            for raw in body.splitlines():
                line = _BULLET.sub("", raw).strip()
                if not line or line.rstrip("。.") in nothing:
                    continue
                for part in _parts(line):
                    number += 1
                    out.append(MemoryPassage(f"{story_id}:{number}", "recap", part, (story_id,)))
    return out


def _parts(line: str) -> list[str]:
    if len(line) <= LINE_CHARS:
        return [line]
    parts, current = [], ""
    for sentence in _SENTENCE.split(line):
        if current and len(current) + len(sentence) > LINE_CHARS:
            parts.append(current)
            current = ""
        current = (current + " " + sentence).strip() if current else sentence
        while len(current) > LINE_CHARS:
            parts.append(current[:LINE_CHARS])
            current = current[LINE_CHARS:]
    if current:
        parts.append(current)
    return parts


class CardMemoryIndex:
    def __init__(self, passages: list[MemoryPassage]) -> None:
        self.passages = passages
        self._index = LexicalIndex([p.text for p in passages]) if passages else None

    def search(self, query: str, k: int) -> list[MemoryHit]:
        """The best `k` passages for the query (a positive score), best first."""
        if self._index is None or k <= 0:
            return []
        return [MemoryHit(self.passages[at], score) for at, score in self._index.search(query, k)]
