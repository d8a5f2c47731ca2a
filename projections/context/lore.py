"""Lore in the context, as Liyuan places it: constant entries in the system prompt (before or after the
character, as each entry's position says); the keyword hits of this turn in the last user message — their
titles, or their full text when the main model cannot look them up (no tools: bring-your-own mode, or
the setting says so) — with an index of every other title under a character budget; entries SillyTavern
places in the chat (@depth, the author's note positions) in full at their depth (`depth_blocks`, placed by
`message_builder.Assembly.add_in_chat`). What lore may take (`lore_budget`): a share of the context's budget
and a cap, each entry counted as the context shows it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain.card.lore import LoreActivation, LoreBookView, LoreEntry, LoreHit, extras_of
from domain.card.rules.lore import LoreBudget, LoreTurn, activate
from domain.card.rules.lore_timers import PastTurn, durations, horizon, timed_turn
from domain.texts import ContextTexts
from domain.values import StorySettings
from projections.context.records import DepthBlock, LoreRef, TailBlock
from projections.context.window import NODE, TEXT, Rendered

INDEX_CHARS = 2000
_NOTE_PLACE = {2: 0, 4: 1, 3: 2}  # the author's note's top, @depth, its bottom


@dataclass(frozen=True, slots=True)
class ConstantLore:
    before: str
    after: str
    refs: tuple[LoreRef, ...]


def ref(hit: LoreHit) -> LoreRef:
    entry = hit.entry
    return LoreRef(
        hit.book_id, entry.uid, entry.label, hit.key, hit.secondary, entry.constant, hit.left_out,
        hit.why_not or None, None if hit.roll is None else round(hit.roll, 2), hit.sticky,
    )  # fmt: skip


def constant_lore(constants: Sequence[LoreHit], fill: Callable[[str], str]) -> ConstantLore:
    """The constant entries of the system prompt (those placed in the chat go there instead)."""
    constants = [h for h in constants if not in_chat(h)]
    before = [fill(h.entry.content.strip()) for h in constants if h.entry.position == "before_char"]
    after = [fill(h.entry.content.strip()) for h in constants if h.entry.position == "after_char"]
    return ConstantLore(
        "\n\n".join(t for t in before if t), "\n\n".join(t for t in after if t), tuple(map(ref, constants))
    )


@dataclass(frozen=True, slots=True)
class LoreShown:
    """How this context shows lore: hits in full or by title (each counted by `count`), and whether the model
    can look entries up (its index then says how)."""

    bodies: bool
    lookup: bool
    count: Callable[[str], int]


def activated(
    lore: Sequence[LoreBookView], kept: Sequence[Rendered], settings: StorySettings, spend: LoreBudget, char: str,
    user: str, clock: Callable[[], float] | None,
) -> LoreActivation:  # fmt: skip
    """The lore activation at the window's last node (the user's words): over its newest messages, its draws
    seeded by that node, with the sticky and cooldown timers the turns of the window before it leave."""
    leaf = kept[-1][NODE]
    everything = settings.lore_min_activations > 0
    turn = LoreTurn(str(leaf.id), leaf.depth + 1, settings.lore_min_activations, settings.lore_min_depth)

    def run(messages: Sequence[str], asked: LoreTurn) -> LoreActivation:
        return activate(lore, messages, char=char, user=user, budget=spend, turn=asked, clock=clock)

    timed = _durations(lore)
    if timed:
        oldest = leaf.depth + 1 - 2 * horizon(timed)  # (the fold reaches no further back)
        past = [
            PastTurn(str(node.id), node.depth + 1, tuple(_scanned(kept[: i + 1], lore, char, user, everything)))
            for i, item in enumerate(kept[:-1])
            if (node := item[NODE]).kind == "user" and not node.hidden and node.depth + 1 > oldest
        ]
        books = tuple((_Same(book.entries), book.book_id, book.excluded) for book in lore)
        costs = spend.key if spend.key is not None else spend.cost  # (a budget that names no key: its function)
        signature = (books, spend.tokens, spend.constants, costs, char, user, turn.min_activations, turn.min_depth)
        turn = timed_turn(turn, past, timed, run, signature)
    return run(_scanned(kept, lore, char, user, everything), turn)


_DURATIONS: dict[tuple[object, ...], dict[tuple[str, int], tuple[int, int]]] = {}


def _durations(lore: Sequence[LoreBookView]) -> dict[tuple[str, int], tuple[int, int]]:
    """The books' timed entries, kept per set of book versions (read once, not at every context)."""
    key = tuple((_Same(book.entries), book.book_id, book.excluded) for book in lore)
    if key not in _DURATIONS:
        if len(_DURATIONS) >= 1024:
            _DURATIONS.clear()
        _DURATIONS[key] = durations(lore)
    return _DURATIONS[key]


class _Same:
    """An object compared by identity (a book's entries, which its version's view keeps)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


def _scanned(
    kept: Sequence[Rendered], lore: Sequence[LoreBookView], char: str, user: str, everything: bool = False
) -> list[str]:
    """The newest messages of the window, oldest first, as lore scans them ("Name: text"): as many as the
    deepest scan of the books asks for (each entry takes its own depth of them), or the whole window
    (`everything`: the minimum of activations may scan deeper)."""
    depth = (
        len(kept)
        if everything
        else max(
            (
                max([book.scan.scan_depth, *(e.scan_depth or 0 for e in book.entries if e.uid not in book.excluded)])
                for book in lore
            ),
            default=0,
        )
    )
    shown = [item for item in kept if not item[NODE].hidden and item[NODE].text.strip()][-depth:] if depth else []
    return [f"{user if item[NODE].kind == 'user' else char}: {item[TEXT]}" for item in shown]


def lore_budget(
    settings: StorySettings, budget: int, shown: LoreShown, fill: Callable[[str], str], texts: ContextTexts,
    constants: bool,
) -> LoreBudget:  # fmt: skip
    """What lore may take in a context of `budget` tokens: `lore_budget` percent of it (at least one token),
    no more than `lore_tokens` where that is set; a constant entry costs its text, a hit its line as shown.
    `constants`: the constant entries are charged (the system prompt is changji's, not the client's)."""
    share = max(round(settings.lore_budget * budget / 100), 1)
    tokens = min(share, settings.lore_tokens) if settings.lore_tokens else share

    def cost(entry: LoreEntry) -> int:
        if entry.constant or extras_of(entry).at_depth is not None:
            return shown.count(fill(entry.content.strip()))
        return shown.count(_entry_line(entry, shown.bodies, fill, texts))

    return LoreBudget(tokens, cost, constants, (shown.bodies, shown.count, texts.language, fill("{{char}}{{user}}")))


def lore_block(
    activation: LoreActivation,
    books: Sequence[LoreBookView],
    texts: ContextTexts,
    shown: LoreShown,
    fill: Callable[[str], str],
    index_chars: int = INDEX_CHARS,
) -> TailBlock | None:
    """The hits of this turn (the activation kept them within the lore budget) and the index of the other
    titles, those left out included (None: the books have no keyword entries)."""
    hit_ids = {(h.book_id, h.entry.uid) for h in activation.hits}
    here = [hit for hit in activation.hits if not in_chat(hit)]  # (the others: in the chat)
    lines = [_entry_line(hit.entry, shown.bodies, fill, texts) for hit in here]
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
    placed = len(activation.hits) - len(here)
    listed = "; ".join(f"{h.entry.label!r} ({h.why})" for h in here)
    why = "lore: " + (listed if here else "nothing here" if placed else "no key matched")
    if placed:
        why += f"; {placed} placed in the chat"
    if activation.left_out:
        why += "; left out: " + "; ".join(f"{h.entry.label!r} ({h.why_not})" for h in activation.left_out)
    if index:
        why += f"; an index of {len(others)} other title(s)"
    if activation.timed_out:
        slow = ", ".join(f"{key!r}" for _, _, key in activation.timed_out)
        why += f"; regex key(s) over the time limit, taken as no match: {slow}"
    refs = tuple(map(ref, (*here, *activation.left_out)))
    return TailBlock("lore", why, "\n".join(parts), lore=refs)


def in_chat(hit: LoreHit) -> bool:
    """Whether an entry goes in the chat rather than the system prompt or the lore block."""
    return extras_of(hit.entry).at_depth is not None and bool(hit.entry.content.strip())


def depth_blocks(activation: LoreActivation, fill: Callable[[str], str], constants: bool = True) -> list[DepthBlock]:
    """The entries placed in the chat (SillyTavern's @depth, and its author's note positions), constant (where
    the system prompt is changji's: `constants`) or hit, in full: one block per depth and role, its entries
    by `order` (lower first; the author's note's top ones before @depth's, its bottom ones after)."""
    placed: dict[tuple[int, str], list[LoreHit]] = {}
    for hit in (*(activation.constants if constants else ()), *activation.hits):
        where = extras_of(hit.entry).at_depth
        if where is not None and in_chat(hit):
            placed.setdefault(where, []).append(hit)
    blocks = []
    for (depth, role), hits in placed.items():
        hits.sort(key=lambda h: (_NOTE_PLACE.get(extras_of(h.entry).placement, 1), h.entry.order))
        text = "\n".join(fill(h.entry.content.strip()) for h in hits)
        why = f"lore placed {depth} message(s) from the end as {role} text: " + "; ".join(
            f"{h.entry.label!r} ({h.why})" for h in hits
        )
        blocks.append(DepthBlock(depth, role, text, why, tuple(map(ref, hits))))
    return blocks


def _entry_line(entry: LoreEntry, bodies: bool, fill: Callable[[str], str], texts: ContextTexts) -> str:
    title = fill(entry.label)
    return "- " + (texts.labelled(title, fill(entry.content.strip())) if bodies else title)


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
