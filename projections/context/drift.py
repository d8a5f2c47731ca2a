"""Drift on a path, and the re-anchoring block it and the turn count put before the user's words.

`drift_at` judges the newest visible reply at or above a node (`domain/tree/rules/drift.py`) from the few
exchanges that end there and the path's first replies, and counts the replies in a row with two or more
signals (whether the next turn is forced to re-anchor). It walks up only as far as those need: the first
replies and each judged reply are remembered (`DriftCache`), so the next turn's judgement walks its few
exchanges (a dozen nodes), and a cold one reads the path's first depths once. Hidden replies are not the model's words and are
skipped, as the context skips them.

`reanchor_block` is the block itself: the identity anchor with why it is there — every
`reanchor_turns` turns, or forced by drift, with what drifted and what to do instead."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from domain.card.anchor import ANCHOR_TEXTS
from domain.language import Language
from domain.tree.rules.drift import (
    EARLY,
    RECENT,
    RUN_MOST,
    Exchange,
    Signal,
    Thresholds,
    fired,
    forced,
    reply_length,
    signals_at,
)
from domain.values import NodeView, StorySettings
from projections.context.records import TailBlock

EARLY_DEPTH = 4 * EARLY + 1  # the early replies are the visible ones among the path's first depths
CACHED = 20_000  # judgements and early lengths remembered, each


@dataclass(frozen=True, slots=True)
class DriftAt:
    """The drift at a node: the reply judged (None: no reply yet), its signals, the replies in a row up to
    it with two or more, and whether the turn after it carries a forced re-anchoring."""

    reply: NodeView | None
    signals: tuple[Signal, ...]
    run: int

    @property
    def fired(self) -> int:
        return fired(self.signals)

    @property
    def forced(self) -> bool:
        return forced(self.run)


NO_DRIFT = DriftAt(None, (), 0)


class DriftCache:
    def __init__(self) -> None:
        self.judged: dict[tuple[object, ...], DriftAt] = {}
        self.early: dict[tuple[UUID, int], tuple[int, ...]] = {}  # (node, render epoch) → the first replies' lengths

    def remember(self, key: tuple[object, ...], at: DriftAt) -> DriftAt:
        self.judged[key] = at
        if len(self.judged) > CACHED:
            del self.judged[next(iter(self.judged))]
        return at


def drift_at(
    node: NodeView,
    load: Callable[[UUID], NodeView],
    settings: StorySettings,
    language: Language,
    cache: DriftCache,
    epoch: int = 0,
    first_nodes: Callable[[UUID], Sequence[NodeView] | None] | None = None,
) -> DriftAt:
    """The drift at `node` (its newest visible reply at or above it). `epoch`: the story's render epoch
    (a hide or a revision anywhere changes what a judgement saw). `first_nodes(node_id)`: the nodes of the
    path's first EARLY_DEPTH depths, root first, read in bulk (None, or not given: walked up to)."""
    thresholds = Thresholds.of(settings)
    reply = next(_replies(node, load), None)
    if reply is None:
        return NO_DRIFT
    return _judged(reply, load, thresholds, language, cache, epoch, first_nodes, 0)[0]


def _judged(
    reply: NodeView,
    load: Callable[[UUID], NodeView],
    thresholds: Thresholds,
    language: Language,
    cache: DriftCache,
    epoch: int,
    first_nodes: Callable[[UUID], Sequence[NodeView] | None] | None,
    depth: int,
) -> tuple[DriftAt, bool]:
    """The judgement at a reply, and whether its run is exact: a run followed back RUN_MOST replies without
    an end is only known to be at least what was counted, and is not remembered (every process, warm or
    cold, counts the same)."""
    key = (reply.id, reply.version, epoch, thresholds, language)
    hit = cache.judged.get(key)
    if hit is not None:
        return hit, True
    recent = _exchanges(reply, load)
    signals = signals_at(recent, early_lengths(reply, load, cache, first_nodes, epoch), language, thresholds)
    run, exact = 0, True
    if fired(signals) >= 2:
        before = next(_replies(load(reply.parent_id), load), None) if reply.parent_id is not None else None
        if before is None:
            run = 1
        elif depth >= RUN_MOST:
            run, exact = 1, False
        else:
            previous, exact = _judged(before, load, thresholds, language, cache, epoch, first_nodes, depth + 1)
            run = min(previous.run + 1, RUN_MOST + 1)
            exact = exact or run == RUN_MOST + 1
    at = DriftAt(reply, signals, run)
    return (cache.remember(key, at) if exact else at), exact


def _replies(node: NodeView, load: Callable[[UUID], NodeView]) -> Iterator[NodeView]:
    """The visible replies with words at or above `node`, newest first."""
    current: NodeView | None = node
    while current is not None:
        if current.kind == "reply" and not current.hidden and current.text.strip():
            yield current
        current = load(current.parent_id) if current.parent_id is not None else None


def _exchanges(reply: NodeView, load: Callable[[UUID], NodeView]) -> list[Exchange]:
    """The RECENT exchanges ending at `reply`, oldest first: each visible reply with the user's words
    before it (the nearest visible user node above it, below the reply before)."""
    out: list[Exchange] = []
    words: list[str] = []
    current: NodeView | None = reply
    pending: NodeView | None = None
    while current is not None and len(out) < RECENT:
        if current.kind == "reply" and not current.hidden and current.text.strip():
            if pending is not None:
                out.append(Exchange(pending.id, pending.turn, "\n".join(reversed(words)), pending.text))
            pending, words = current, []
        elif current.kind == "user" and not current.hidden and pending is not None:
            words.append(current.text)
        current = load(current.parent_id) if current.parent_id is not None else None
    if pending is not None and len(out) < RECENT:
        out.append(Exchange(pending.id, pending.turn, "\n".join(reversed(words)), pending.text))
    out.reverse()
    return out


def early_lengths(
    node: NodeView,
    load: Callable[[UUID], NodeView],
    cache: DriftCache,
    first_nodes: Callable[[UUID], Sequence[NodeView] | None] | None = None,
    epoch: int = 0,
) -> tuple[int, ...]:
    """The lengths of the first EARLY visible replies among the path's first EARLY_DEPTH depths (as they
    render at `epoch`: a hide or a revision changes them)."""
    if node.depth > EARLY_DEPTH:
        walked: list[NodeView] = []
        current: NodeView | None = node
        while current is not None and current.depth > EARLY_DEPTH:
            if (current.id, epoch) in cache.early:
                break
            walked.append(current)
            if len(walked) == 2 * RECENT + 2 and first_nodes is not None:  # a cold path: read its head in bulk
                first = first_nodes(node.id)
                if first is not None:
                    return _remember_early(cache, walked, _lengths(first), epoch)
            current = load(current.parent_id) if current.parent_id is not None else None
        if current is None:
            return ()
        known = cache.early.get((current.id, epoch))
        if known is None:
            known = early_lengths(current, load, cache, epoch=epoch)
        return _remember_early(cache, walked, known, epoch)
    head: list[NodeView] = []
    current = node
    while current is not None:
        head.append(current)
        current = load(current.parent_id) if current.parent_id is not None else None
    return _remember_early(cache, [node], _lengths(head[::-1]), epoch)


def _lengths(head: Sequence[NodeView]) -> tuple[int, ...]:
    replies = (n for n in head if n.depth <= EARLY_DEPTH and n.kind == "reply" and not n.hidden and n.text.strip())
    return tuple(reply_length(n.text) for n in replies)[:EARLY]


def _remember_early(
    cache: DriftCache, nodes: Sequence[NodeView], lengths: tuple[int, ...], epoch: int
) -> tuple[int, ...]:
    for n in nodes:
        cache.early[(n.id, epoch)] = lengths
    while len(cache.early) > CACHED:
        del cache.early[next(iter(cache.early))]
    return lengths


def reanchor_block(
    anchor: str,
    char: str,
    user: str,
    language: Language,
    turn: int,
    every: int,
    drift: DriftAt,
    fill: Callable[[str], str],
) -> TailBlock | None:
    """The re-anchoring block for the context of turn `turn` (the user's words), or None: every `every`
    turns (0: never), and on the turn after a reply whose drift forces one (`drift`, judged there)."""
    periodic = every > 0 and turn > 0 and turn % every == 0
    if not (periodic or drift.forced) or not anchor.strip():
        return None
    texts = ANCHOR_TEXTS[language]
    text = f"{texts.heading.format(char=char)}\n{fill(anchor.strip())}"
    whys = [f"re-anchoring every {every} turns (turn {turn})"] if periodic else []
    nodes: tuple[UUID, ...] = ()
    if drift.forced:
        up = [s for s in drift.signals if s.fired]
        names = texts.hint_sep.join(texts.signal_names[s.name] for s in up)
        hints = texts.hint_sep.join(_hint(s, texts.hints[s.name], texts.languages, char, user) for s in up)
        text += "\n" + texts.forced.format(char=char, signals=names, hints=hints)
        assert drift.reply is not None
        whys.append(
            f"forced by drift at reply {drift.reply.id} (turn {drift.reply.turn}): "
            + "; ".join(f"{s.name} {s.value:g} ≥ {s.threshold:g}" for s in up)
        )
        nodes = (drift.reply.id,)
    else:
        text += "\n" + texts.periodic.format(char=char)
    return TailBlock("reanchor", "; ".join(whys), text, nodes)


def _hint(signal: Signal, hint: str, languages: Mapping[str, str], char: str, user: str) -> str:
    return hint.format(
        chars=signal.evidence, phrase=signal.evidence[:80], match=signal.evidence[:60], char=char, user=user,
        language=languages.get(signal.evidence, signal.evidence),
    )  # fmt: skip
