"""The verbatim window: whole turns taken newest first while they fit a token budget, walked from the
leaf up to the last summarized node, and cached by leaf so the next leaf below extends it.

Per-node renderings (macros filled, tokens counted) are cached by (node id, node version), so an
assembly counts only what is new; a window at a new leaf extends its parent's window with the few
nodes in between and drops whole turns from the front. The cost of a window depends on its size,
never on the story's length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise, takewhile
from operator import itemgetter
from typing import Any, Final, NamedTuple
from uuid import UUID

from domain.ports import TokenCounter
from domain.tree.rules.compaction import NO_LAYERS, Layers, digest_opened, summary_of
from domain.tree.rules.paths import walk_up
from domain.values import NodeView
from projections.context.records import Message
from projections.context.system_prompt import fill_macros

MESSAGE_OVERHEAD_TOKENS = 4
COUNTED_TEXTS = 1024  # distinct system prompts and instructions whose counts are kept
COUNTED_LINES = 32_768  # recalled lines whose counts are kept (by the text's hash: a few MB)
RECALL_LINES = 8192  # recalled lines kept as made (a few MB of text)
SPANS = 4096  # summarized spans remembered rendered (or as too big)
UNSETTLED = ("writing", "waiting")
NODE: Final = 0  # the parts of a `Rendered`, by name
TEXT: Final = 1
TOKENS: Final = 2
MESSAGE: Final = 3
_TOKENS = itemgetter(TOKENS)


Summarized = Sequence[tuple[UUID, int]]  # (node, depth) of each summary of the story, in the order recorded
Rendered = tuple[NodeView, str, int, Message | None]
"""One node as a window holds it: the node, its text with macros filled, its tokens, and its message
(None: it shows nothing — hidden, or empty); read with the names below. A plain tuple on purpose: a
window builds one per node, and a named record (NamedTuple or dataclass) made a 600-node assembly
about 30 % slower (0.49 → 0.65 ms, `ops/bench/context.py`)."""


class WindowKey(NamedTuple):
    """What a cached window was fitted for: the tokens its turns may take, the names, the render epoch."""

    budget: int
    char: str
    user: str
    epoch: int


class RenderCache:
    """Per-node rendered text and token count, keyed by (node id, node version): a node's rendering
    changes only when the node does (or when the story's names do, which is checked on every hit), so
    an assembly counts only what is new. Bounded: the oldest entries go first."""

    def __init__(self, counter: TokenCounter, maxsize: int = 200_000) -> None:
        self.counter = counter
        self.maxsize = maxsize
        self._items: dict[tuple[int, int], tuple[str, str, str, int]] = {}  # → (char, user, text, tokens)
        self._counts: dict[str, int] = {}
        self._lines: dict[int, int] = {}
        self.summaries: dict[tuple[object, ...], int] = {}  # summary layers' tokens, by what they are made of
        # recalled lines, by passage, seq, names, language, whether a part of a turn, the day it is dated
        self.recall_lines: dict[tuple[str, int, str, str, str, bool, str | None], str] = {}

    def render(self, node: NodeView, char: str, user: str) -> tuple[str, int]:
        key = (node.id.int, node.version)
        hit = self._items.get(key)
        if hit is None or hit[0] != char or hit[1] != user:
            text = fill_macros(node.text, char, user)
            hit = self._items[key] = (char, user, text, self.counter.count(text) + MESSAGE_OVERHEAD_TOKENS)
            if len(self._items) > self.maxsize:
                del self._items[next(iter(self._items))]
        return hit[2], hit[3]

    def count_raw(self, text: str) -> int:
        """Tokens of a text that is part of a message (summaries, scene blocks), remembered by text."""
        return self._remembered(self._counts, "\x00" + text, text, COUNTED_TEXTS)

    def count_line(self, text: str) -> int:
        """Tokens of a recalled line, remembered by the text's hash: a story's passages come back turn
        after turn, in ever other company, and there are too many of them to keep their texts."""
        return self._remembered(self._lines, hash(text), text, COUNTED_LINES)

    def count(self, text: str) -> int:
        """A message's tokens; remembered by text (system prompts and card instructions recur every turn)."""
        return self._remembered(self._counts, text, text, COUNTED_TEXTS, MESSAGE_OVERHEAD_TOKENS)

    def _remembered(self, memo: dict[Any, int], key: object, text: str, most: int, extra: int = 0) -> int:
        """`text`'s tokens (+ `extra`) from `memo` by `key`, counted once; the oldest entries go first."""
        tokens = memo.get(key)
        if tokens is None:
            tokens = memo[key] = self.counter.count(text) + extra
            if len(memo) > most:
                del memo[next(iter(memo))]
        return tokens


@dataclass(frozen=True, slots=True)
class Window:
    """The whole turns a context kept at some leaf (root→leaf order), for the next leaf below to extend."""

    key: WindowKey
    kept: tuple[Rendered, ...]
    tokens: int
    cut_at: NodeView | None  # the newest turn left out for the budget (None: nothing cut)
    settled: bool = True  # no node of the window is a draft still being written
    boundary: NodeView | None = None  # the last summarized node above the window (None: none found)
    summaries: int = 0  # how many of the story's summaries (`Summarized`) it was checked against


class WindowCache:
    """Windows by leaf. A context at a new leaf extends the window of its nearest cached ancestor with
    the few nodes in between and drops whole turns from the front, instead of walking the path again.

    A window is reused only for the same key (turn budget, names and `epoch`: the caller bumps the
    epoch when a node's rendering changes — hide, unhide, revise), and only windows whose nodes are
    all settled are kept (a draft still being written may change). A summary recorded since a window
    was made (`Summarized`, the story's summaries in order) makes it start over only when it lands on
    one of its nodes, or between it and the summary above it: one on another branch leaves it be."""

    def __init__(self, maxsize: int = 4096) -> None:
        self.maxsize = maxsize
        self._items: dict[UUID, Window] = {}
        # summarized spans shown word for word again (`unfold_episodes`), by (last node, first depth,
        # names, epoch): the span rendered whole, or the largest room it was found not to fit
        self.spans: dict[tuple[UUID, int, str, str, int], tuple[Rendered, ...] | int] = {}

    def get(self, node_id: UUID, key: WindowKey, summarized: Summarized = ()) -> Window | None:
        window = self._items.get(node_id)
        if window is None or window.key != key:
            return None
        if window.summaries < len(summarized):
            if any(_touches(window, node, depth) for node, depth in summarized[window.summaries :]):
                del self._items[node_id]
                return None
            window = self._items[node_id] = replace(window, summaries=len(summarized))
        return window

    def put(self, node_id: UUID, window: Window) -> None:
        if len(self._items) >= self.maxsize:
            del self._items[next(iter(self._items))]
        self._items[node_id] = window


def _touches(window: Window, node_id: UUID, depth: int) -> bool:
    """Whether a summary on (node, depth) may change what the window holds or where its summaries
    start: it is on one of its nodes, or above them and below the summary above them (an ancestor
    or not: either way the window starts over)."""
    if not window.kept:
        return True
    first = window.kept[0][NODE].depth
    if depth >= first:
        index = depth - first
        return index < len(window.kept) and window.kept[index][NODE].id == node_id
    return window.boundary is None or depth > window.boundary.depth


class Verbatim:
    """The path leaf→root up to, not including, the first node that carries a summary (the boundary).
    `seek()` reads on, without rendering, to find the boundary above a budget cut — only when the story
    has summaries at all (`summarized`): a story without any is never walked to its root."""

    def __init__(self, leaf: NodeView, rest: Iterator[NodeView], summarized: bool) -> None:
        self.nodes, self.summarized = _chain(leaf, rest), summarized
        self.boundary: NodeView | None = None
        self.done = False

    def __iter__(self) -> Verbatim:
        return self

    def __next__(self) -> NodeView:
        if self.done:
            raise StopIteration
        node = next(self.nodes, None)
        if node is None or summary_of(node):
            self.boundary, self.done = node, True
            raise StopIteration
        return node

    def seek(self) -> NodeView | None:
        if self.summarized:
            for _ in self:
                pass
        return self.boundary


def fit_window(
    upward: Verbatim, key: WindowKey, cache: RenderCache, windows: WindowCache | None, summarized: Summarized = ()
) -> Window:
    """Whole turns newest first while they fit `key.budget`; the first turn that does not fit and
    everything older is cut. Stops early at the nearest ancestor whose window is cached, and extends it."""
    budget, char, user, _ = key
    seen = len(summarized)
    kept: list[Rendered] = []  # newest first
    turn: list[Rendered] = []
    turn_tokens = used = 0
    for node in upward:
        base = windows.get(node.id, key, summarized) if windows is not None else None
        if base is not None:
            return replace(extend_window(base, [*reversed(turn), *reversed(kept)], key), summaries=seen)
        text, tokens = cache.render(node, char, user) if node.text and not node.hidden else ("", 0)
        message = Message("user" if node.kind == "user" else "assistant", text) if text else None
        turn.append((node, text, tokens, message))
        turn_tokens += tokens
        if node.kind in ("user", "greeting"):
            if kept and used + turn_tokens > budget:
                kept.reverse()
                return Window(key, tuple(kept), used, node, _settled(kept), upward.seek(), seen)
            kept.extend(turn)
            used += turn_tokens
            turn, turn_tokens = [], 0
    kept.extend(turn)  # only a hand-made gap leaves a turn without its user node
    used += turn_tokens
    kept.reverse()
    return Window(key, tuple(kept), used, None, _settled(kept), upward.boundary, seen)


def extend_window(base: Window, below: list[Rendered], key: WindowKey) -> Window:
    """The base window with the nodes below it appended, then whole turns dropped from the front
    until the rest fits `key.budget` (the newest turn always stays)."""
    items = base.kept + tuple(below)
    tokens = base.tokens + sum(map(_TOKENS, below))
    starts = (i for i, item in enumerate(items) if item[NODE].kind in ("user", "greeting"))  # read only as far as cut
    cut_at, first = base.cut_at, 0
    for start, next_start in pairwise(starts):
        if tokens <= key.budget:
            break
        tokens -= sum(map(_TOKENS, items[start:next_start]))
        cut_at, first = items[start][NODE], next_start
    return Window(key, items[first:], tokens, cut_at, base.settled and _settled(below), base.boundary)


def unfold_episodes(
    window: Window,
    layers: Layers,
    budget: int,
    summary_tokens: Callable[[Layers], int],
    load: Callable[[UUID], NodeView],
    cache: RenderCache,
    windows: WindowCache | None = None,
) -> tuple[Window, Layers]:
    """The window filling its budget: the newest episodes above it are shown word for word again, whole
    and newest first, while the turns and the summary layers left fit `budget` — the whole path, when it
    all fits; a digest gives way to the previous digest and the episodes it absorbed (still on their
    nodes) when they fit. Costs a walk over what is unfolded, never more than the budget holds."""
    kept, tokens = window.kept, window.tokens
    if window.boundary is None:
        return window, layers
    spans = windows.spans if windows is not None else {}
    whole = _unfolded(window, window.boundary, 0, budget - tokens, load, cache, spans)  # all fits: no summary
    if whole is not None:
        return Window(window.key, (*whole, *kept), tokens + sum(map(_TOKENS, whole)), None, window.settled), NO_LAYERS
    while layers.episodes or layers.digest:  # else the newest episodes, one by one
        if not layers.episodes:  # only the digest is left: it stands for the episodes it absorbed
            assert layers.digest is not None
            if layers.digest[1].edited:  # the user's corrections live in it: it stays
                break
            opened = digest_opened(layers.digest[0], load)
            if opened.digest == layers.digest or tokens + summary_tokens(opened) > budget:
                break
            layers = opened
            continue
        end, start = layers.episodes[-1][0], layers.episodes[-1][1].start_depth
        rest = Layers(layers.digest, layers.episodes[:-1])
        turn = _unfolded(window, end, start, budget - tokens - summary_tokens(rest), load, cache, spans)
        if turn is None:
            break
        kept, tokens, layers = (*turn, *kept), tokens + sum(map(_TOKENS, turn)), rest
    if kept is window.kept:
        return window, layers
    boundary = layers.episodes[-1][0] if layers.episodes else layers.digest[0] if layers.digest else None
    unfolded = kept[: len(kept) - len(window.kept)]  # (the window's own turns are known settled or not)
    return Window(window.key, kept, tokens, None, window.settled and _settled(unfolded), boundary), layers


def _unfolded(
    window: Window,
    end: NodeView,
    start: int,
    room: int,
    load: Callable[[UUID], NodeView],
    cache: RenderCache,
    spans: dict[tuple[UUID, int, str, str, int], tuple[Rendered, ...] | int],
) -> tuple[Rendered, ...] | None:
    """The nodes from depth `start` down to `end`, rendered, in root→leaf order; None when they take
    more than `room` tokens (read only until they do). Remembered in `spans`: a span is walked once,
    and a span found too big is not walked again for a room no larger."""
    key = (end.id, start, window.key.char, window.key.user, window.key.epoch)
    known = spans.get(key)
    if isinstance(known, tuple):
        return known if sum(map(_TOKENS, known)) <= room else None
    if known is not None and room <= known:
        return None
    char, user = window.key.char, window.key.user
    turn: list[Rendered] = []
    cost = 0
    for node in takewhile(lambda n: n.depth >= start, walk_up(load, end.id)):
        text, count = cache.render(node, char, user) if node.text and not node.hidden else ("", 0)
        message = Message("user" if node.kind == "user" else "assistant", text) if text else None
        turn.append((node, text, count, message))
        cost += count
        if cost > room:
            _remember(spans, key, room)
            return None
    turn.reverse()
    rendered = tuple(turn)
    _remember(spans, key, rendered)
    return rendered


def _remember(
    spans: dict[tuple[UUID, int, str, str, int], tuple[Rendered, ...] | int],
    key: tuple[UUID, int, str, str, int],
    value: tuple[Rendered, ...] | int,
) -> None:
    spans.pop(key, None)
    if len(spans) >= SPANS:
        del spans[next(iter(spans))]
    spans[key] = value


def _settled(items: Iterable[Rendered]) -> bool:
    return not any(item[NODE].phase in UNSETTLED for item in items)


def _chain(first: NodeView, rest: Iterator[NodeView]) -> Iterator[NodeView]:
    yield first
    yield from rest
