"""The 【往事回忆】 block: what the card's memory holds that bears on the user's words — handbook items and
lines of earlier stories' recaps (`projections/recall/card_memory_index.py`), best first, as many as fit
its token share, each listed in the explain list with the stories behind it. What the resident summary
already says is not said twice."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from domain.texts import ContextTexts
from projections.context.records import MemoryRef, TailBlock
from projections.recall.card_memory_index import MemoryHit


def memory_block(
    hits: Sequence[MemoryHit],
    resident: str,
    budget: int,
    count: Callable[[str], int],
    texts: ContextTexts,
    fill: Callable[[str], str] = lambda text: text,
) -> TailBlock | None:
    """The block for the best hits that fit `budget` tokens (None: none fits, or nothing was found);
    `fill`: the card's macros filled in."""
    kept: list[tuple[MemoryHit, str]] = []
    used = count(texts.memory_opener)
    seen: set[str] = set()
    for hit in hits:
        words = fill(hit.passage.text)
        if words in seen or words in resident:
            continue
        line = f"- {words}"
        tokens = count(line) + 1
        if used + tokens > budget:
            break
        kept.append((hit, line))
        seen.add(words)
        used += tokens
    if not kept:
        return None
    text = texts.memory_opener + "\n" + "\n".join(line for _, line in kept)
    why = f"recalled from the card's memory for the user's words: {len(kept)} of {len(hits)} passages (BM25)"
    refs = tuple(MemoryRef(hit.passage.key, hit.passage.kind, hit.passage.sources) for hit, _ in kept)
    scores = tuple(round(hit.score, 4) for hit, _ in kept)
    return TailBlock("memory", why, text, (), scores, used, memory=refs)
