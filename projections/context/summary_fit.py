"""The summary layers of a context counted in tokens, and cut to fit a budget smaller than they take
(anchors whole, the newest layers whole while they fit, older ones cut at a line, with a note)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from uuid import UUID

from domain.texts import ContextTexts
from domain.tree.rules.compaction import Layers
from domain.values import NodeView, Prelude
from projections.context.summaries import SummaryBlock, summary_blocks
from projections.context.system_prompt import fill_macros
from projections.context.window import (
    COUNTED_TEXTS,
    MESSAGE_OVERHEAD_TOKENS,
    RenderCache,
)


@dataclass(frozen=True, slots=True)
class CountedSummary:
    block: SummaryBlock
    tokens: int


def counted_summaries(
    layers: Layers,
    load: Callable[[UUID], NodeView],
    char: str,
    user: str,
    texts: ContextTexts,
    cache: RenderCache,
    prelude: Prelude | None = None,
    identity: str = "",
) -> list[CountedSummary]:
    """The summary layers' blocks with their tokens (the message's overhead on the first); `identity`: the
    identity anchor the digest opens with."""
    blocks = summary_blocks(layers, load, char, user, fill_macros, texts, prelude, identity)
    return [
        CountedSummary(block, cache.count_raw(block.text) + (MESSAGE_OVERHEAD_TOKENS if i == 0 else 0))
        for i, block in enumerate(blocks)
    ]


def shortened(
    summaries: list[CountedSummary], room: int, cache: RenderCache, texts: ContextTexts
) -> list[CountedSummary]:
    """Summary layers that do not fit `room` tokens (a proxied client's budget may be smaller than the
    story's), cut to fit: the anchors kept whole (starred words are never dropped), the newest layers kept
    whole while they fit, the older ones cut at a line — their first line (its opener, its label) kept —
    with a note saying so. Each layer stays, standing for the turns it covers: at a budget too small for
    even that, the layers' first lines and notes are what is sent."""
    left = max(room, 0) - sum(s.tokens for s in summaries if s.block.what == "anchors")
    kept: list[CountedSummary] = []
    for i in range(len(summaries) - 1, -1, -1):
        summary = summaries[i]
        if summary.block.what == "anchors":
            kept.append(summary)
            continue
        overhead = MESSAGE_OVERHEAD_TOKENS if i == 0 else 0
        if summary.tokens <= left - _LEAST_FOR_OLDER * i:
            kept.append(summary)
            left -= summary.tokens
            continue
        allowed = left - _LEAST_FOR_OLDER * i - overhead
        text = _cut_to(summary.block.text, allowed, cache, texts.shortened)
        tokens = cache.counter.count(text) + overhead
        why = f"{summary.block.why}; cut to fit the budget"
        kept.append(CountedSummary(replace(summary.block, text=text, why=why), tokens))
        left -= tokens
    kept.reverse()
    return kept


_LEAST_FOR_OLDER = 24  # tokens kept for each older layer while a newer one is placed (its note, its first line)


def _cut_to(text: str, tokens: int, cache: RenderCache, note: str) -> str:
    """`text`'s first lines that fit `tokens` with `note` after them; its first line at least."""
    lines = text.split("\n")
    low, high = 1, len(lines)  # the most lines that fit, found by halving
    while low < high:
        middle = (low + high + 1) // 2
        if cache.counter.count("\n".join([*lines[:middle], note])) <= tokens:
            low = middle
        else:
            high = middle - 1
    return "\n".join([*lines[:low], note]) if low < len(lines) else text


def layers_tokens(
    layers: Layers,
    load: Callable[[UUID], NodeView],
    char: str,
    user: str,
    texts: ContextTexts,
    epoch: int,
    cache: RenderCache,
    identity: str = "",
) -> int:
    """What the layers take, remembered by what they are made of (the render epoch covers the anchors
    they quote): trying episodes one by one, and every reply's budget test, ask for the same layers
    turn after turn."""
    made_of = (_made_of(layers), char, user, texts.language, epoch, identity if layers.digest else "")
    tokens = cache.summaries.get(made_of)
    if tokens is None:
        tokens = cache.summaries[made_of] = sum(
            s.tokens for s in counted_summaries(layers, load, char, user, texts, cache, identity=identity)
        )
        if len(cache.summaries) > COUNTED_TEXTS:
            del cache.summaries[next(iter(cache.summaries))]
    return tokens


def _made_of(layers: Layers) -> tuple[object, ...]:
    digest = (layers.digest[0].id, layers.digest[0].version) if layers.digest else None
    return (digest, *((node.id, node.version) for node, _ in layers.episodes))
