"""The card's resident summary in a context: what the card's earlier stories left, in the 【前情提要】
message after the story's own summary layers (or opening that message, when the story has none yet).

Its room is the card memory's rule (`domain/memory/resident.py`): it shares 4,300 characters with the
story's digest (and a carried-over prelude) and the scene (snapshot and roster), itself at most 1,200, and is left out under 200 —
what the story itself knows always comes first. It must also fit the tokens the budget leaves beside the
summaries and the last exchange; when it does not, it is left out whole, and the explain list says so."""

from __future__ import annotations

from dataclasses import dataclass

from domain.memory.resident import SHARED_CHARS, fit_resident
from domain.texts import ContextTexts
from projections.context.records import ExplainBlock, TailBlock
from projections.context.summaries import SummaryBlock
from projections.context.summary_fit import CountedSummary
from projections.context.system_prompt import fill_macros
from projections.context.window import MESSAGE_OVERHEAD_TOKENS, RenderCache

SHARING = frozenset({"scene", "roster"})  # the tail blocks that share the resident summary's room


STEP = 250  # the others' characters counted in steps of this many: a summary cut where its room lies moves
# only when the scene grows or shrinks by a step, not at every turn (message 1 stays the cached prefix it was)


def _steadied(chars: int) -> int:
    return -(-chars // STEP) * STEP


def resident_tokens(
    resident: Resident, tails: list[TailBlock], char: str, user: str, texts: ContextTexts, cache: RenderCache
) -> int:
    """What the resident summary may take beside the scene alone (the story's digest left aside: at least as
    much as `with_resident` places), so the window leaves it room before it fills with turns."""
    other = _steadied(sum(len(block.text) for block in tails if block.what in SHARING))
    fitted = fit_resident(fill_macros(resident.text, char, user), other, texts.language).text
    if fitted is None:
        return 0
    return cache.count_raw(f"{texts.resident_heading.format(char=char, user=user)}\n{fitted}") + MESSAGE_OVERHEAD_TOKENS


@dataclass(frozen=True, slots=True)
class Resident:
    """A card's resident summary as its memory holds it, at the memory's version."""

    text: str
    version: int


def with_resident(
    summaries: list[CountedSummary],
    resident: Resident,
    tails: list[TailBlock],
    room: int,
    char: str,
    user: str,
    texts: ContextTexts,
    cache: RenderCache,
) -> tuple[list[CountedSummary], ExplainBlock | None]:
    """The summary blocks with the resident summary after them when it has room (`room`: the tokens the
    budget leaves beside the summaries), else as they were and an explain block saying why it is out."""
    digest = sum(len(s.block.text) for s in summaries if s.block.what in ("prelude", "digest"))
    other = _steadied(digest + sum(len(block.text) for block in tails if block.what in SHARING))
    fitted = fit_resident(fill_macros(resident.text, char, user), other, texts.language)
    version = f"card memory v{resident.version}"
    if fitted.text is None:
        if not resident.text.strip():
            return summaries, None
        why = (
            f"resident summary ({version}) left out: {fitted.room} of {SHARED_CHARS} shared characters left beside"
            f" the story's digest and the scene ({other})"
        )
        return summaries, ExplainBlock("resident", why, version=resident.version)
    names = {"char": char, "user": user}
    if summaries:
        text = f"{texts.resident_heading.format(**names)}\n{fitted.text}"
    else:
        text = f"{texts.resident_opener.format(**names)}\n\n{fitted.text}"
    tokens = cache.count_raw(text) + (0 if summaries else MESSAGE_OVERHEAD_TOKENS)
    if tokens > room - sum(s.tokens for s in summaries):
        why = f"resident summary ({version}) left out: its {tokens} tokens do not fit the budget"
        return summaries, ExplainBlock("resident", why, version=resident.version)
    why = f"resident summary: what the card's earlier stories left ({version})"
    if fitted.cut:
        why += f"; cut to its room of {fitted.room} characters (shared with the story's digest and the scene)"
    block = SummaryBlock("resident", why, text, (), None, resident.version)
    return [*summaries, CountedSummary(block, tokens)], None
