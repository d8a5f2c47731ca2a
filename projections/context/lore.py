"""Lore in the context, as Liyuan places it: constant entries in the system prompt (before or after the
character, as each entry's position says); the keyword hits of this turn in the last user message — their
titles, or their full text when the main model cannot look them up (no tools: bring-your-own mode, or
the setting says so) — with an index of every other title under a character budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain.card.lore import LoreActivation, LoreBookView, LoreHit
from domain.texts import ContextTexts
from projections.context.records import LoreRef, TailBlock

INDEX_CHARS = 2000


@dataclass(frozen=True, slots=True)
class ConstantLore:
    before: str
    after: str
    refs: tuple[LoreRef, ...]


def ref(hit: LoreHit) -> LoreRef:
    entry = hit.entry
    return LoreRef(hit.book_id, entry.uid, entry.label, hit.key, hit.secondary, hit.entry.constant)


def constant_lore(constants: Sequence[LoreHit], fill: Callable[[str], str]) -> ConstantLore:
    before = [fill(h.entry.content.strip()) for h in constants if h.entry.position == "before_char"]
    after = [fill(h.entry.content.strip()) for h in constants if h.entry.position == "after_char"]
    return ConstantLore(
        "\n\n".join(t for t in before if t), "\n\n".join(t for t in after if t), tuple(map(ref, constants))
    )


@dataclass(frozen=True, slots=True)
class LoreShown:
    """How this context shows lore: hits in full (within `tokens`, counted by `count`) or by title, and
    whether the model can look entries up (its index then says how)."""

    bodies: bool
    lookup: bool
    tokens: int
    count: Callable[[str], int]


def lore_block(
    activation: LoreActivation,
    books: Sequence[LoreBookView],
    texts: ContextTexts,
    shown: LoreShown,
    fill: Callable[[str], str],
    index_chars: int = INDEX_CHARS,
) -> TailBlock | None:
    """The hits of this turn and the index of the other titles (None: the books have no keyword entries).
    Hits in full take at most `shown.tokens`; a hit past that goes by title."""
    hit_ids = {(h.book_id, h.entry.uid) for h in activation.hits}
    lines, room = [], shown.tokens
    for hit in activation.hits:
        line = _hit_line(hit, shown.bodies, fill, texts)
        if shown.bodies and (cost := shown.count(line)) > room:
            line = _hit_line(hit, False, fill, texts)
        elif shown.bodies:
            room -= cost
        lines.append(line)
    others = [
        fill(entry.label)
        for book in books
        for entry in book.entries
        if entry.enabled
        and not entry.constant
        and entry.uid not in book.excluded
        and (book.book_id, entry.uid) not in hit_ids
    ]
    parts = [texts.lore_hits + "\n" + "\n".join(lines)] if lines else []
    index = _index(
        list(dict.fromkeys(others)), texts.lore_index if shown.lookup else texts.lore_index_plain, texts, index_chars
    )
    if index:
        parts.append(index)
    if not parts:
        return None
    why = "lore: " + (
        "; ".join(f"{h.entry.label!r} ({h.why})" for h in activation.hits) if activation.hits else "no key matched"
    )
    if activation.not_kept:
        why += f"; {activation.not_kept} more hit(s) over the limit"
    if index:
        why += f"; an index of {len(others)} other title(s)"
    if activation.timed_out:
        slow = ", ".join(f"{key!r}" for _, _, key in activation.timed_out)
        why += f"; regex key(s) over the time limit, taken as no match: {slow}"
    return TailBlock("lore", why, "\n".join(parts), lore=tuple(map(ref, activation.hits)))


def _hit_line(hit: LoreHit, bodies: bool, fill: Callable[[str], str], texts: ContextTexts) -> str:
    title = fill(hit.entry.label)
    return "- " + (texts.labelled(title, fill(hit.entry.content.strip())) if bodies else title)


def _index(titles: list[str], heading: str, texts: ContextTexts, budget: int) -> str:
    if not titles:
        return ""
    kept: list[str] = []
    used = len(heading)
    for title in titles:
        if used + len(title) + 1 > budget:
            break
        kept.append(title)
        used += len(title) + len(texts.list_sep)
    more = len(titles) - len(kept)
    line = texts.list_sep.join(kept) + (texts.lore_more.format(count=more) if more else "")
    return f"{heading}\n{line}"
