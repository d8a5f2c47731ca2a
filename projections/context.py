"""The context for the next turn: OpenAI `messages` plus an explain list of where every part came from.

v1 layers: the system prompt built from the card, the greeting, the verbatim path (hidden nodes left
out), and in the last user message, before the user's words, the scene at the leaf (【世界状态】 and
【登场名录】, once anything on the path was patched) and the card's post-history instructions. The path is walked from
the leaf upward only as far as the token budget (window − reply reserve) allows, so the cost of an
assembly depends on the window, never on the story's length. A cut is reported, never silent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice, pairwise
from operator import attrgetter, eq, itemgetter
from typing import Literal
from uuid import UUID

from domain.compaction import NO_LAYERS, layers_from, summary_of
from domain.ports import TokenCounter
from domain.scene import format_roster, format_state
from domain.values import CardData, NodeView, StorySettings
from projections.scenes import SceneAt
from projections.summaries import SummaryBlock, summary_blocks

Role = Literal["system", "user", "assistant"]
MESSAGE_OVERHEAD_TOKENS = 4
COUNTED_TEXTS = 1024  # distinct system prompts and instructions whose counts are kept
_MACROS = re.compile(r"\{\{(char|user)\}\}|<(BOT|USER)>", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class ExplainBlock:
    """One part of an assembled context: what it is, why it is there, which nodes, how big."""

    what: str
    why: str
    node_ids: tuple[UUID, ...] = ()
    chars: int = 0
    tokens: int = 0
    message_index: int | None = None
    covers: tuple[int, int] | None = None  # summaries and cuts: the depth range of the path they stand for


@dataclass(frozen=True, slots=True)
class Context:
    messages: tuple[Message, ...]
    explain: tuple[ExplainBlock, ...]
    tokens: int
    budget: int
    leaf_id: UUID
    cut_turns: int = 0
    cut_nodes: int = 0


def fill_macros(text: str, char: str, user: str) -> str:
    return _MACROS.sub(lambda m: char if (m.group(1) or m.group(2)).lower() in ("char", "bot") else user, text)


def build_system_prompt(card: CardData, user_name: str) -> str:
    """Byte-stable for a given card revision and user name (providers can cache the prefix)."""
    sections = [
        f"# 卡作者附加指令（优先级最高）\n{card.system_prompt}" if card.system_prompt else "",
        f"# 你扮演的角色：{card.name}\n{card.description}".rstrip(),
        f"## 性格\n{card.personality}" if card.personality else "",
        f"## 当前场景\n{card.scenario}" if card.scenario else "",
        f"## 对白示例（仅示范口吻，不是已发生的剧情）\n{card.mes_example}" if card.mes_example else "",
        f"# 用户扮演：{user_name}",
    ]
    return fill_macros("\n\n".join(s for s in sections if s), card.name, user_name)


class RenderCache:
    """Per-node rendered text and token count, keyed by (node id, node version): a node's rendering
    changes only when the node does (or when the story's names do, which is checked on every hit), so
    an assembly counts only what is new. Bounded: the oldest entries go first."""

    def __init__(self, counter: TokenCounter, maxsize: int = 200_000) -> None:
        self.counter = counter
        self.maxsize = maxsize
        self._items: dict[tuple[int, int], tuple[str, str, str, int]] = {}
        self._counts: dict[str, int] = {}

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
        key = "\x00" + text
        tokens = self._counts.get(key)
        if tokens is None:
            tokens = self._counts[key] = self.counter.count(text)
            if len(self._counts) > COUNTED_TEXTS:
                del self._counts[next(iter(self._counts))]
        return tokens

    def count(self, text: str) -> int:
        """A message's tokens; remembered by text (system prompts and card instructions recur every turn)."""
        tokens = self._counts.get(text)
        if tokens is None:
            tokens = self._counts[text] = self.counter.count(text) + MESSAGE_OVERHEAD_TOKENS
            if len(self._counts) > COUNTED_TEXTS:
                del self._counts[next(iter(self._counts))]
        return tokens


Rendered = tuple[NodeView, str, int, Message | None]  # node, text, tokens, its message (None: not shown)


@dataclass(frozen=True, slots=True)
class _Window:
    """The whole turns a context kept at some leaf (root→leaf order), for the next leaf below to extend."""

    key: tuple[int, str, str, int]
    kept: tuple[Rendered, ...]
    tokens: int
    cut_at: NodeView | None
    settled: bool = True  # no node of the window is a draft still being written
    boundary: NodeView | None = None  # the last summarized node above the window (None: none found)


class WindowCache:
    """Windows by leaf. A context at a new leaf extends the window of its nearest cached ancestor with
    the few nodes in between and drops whole turns from the front, instead of walking the path again.

    A window is reused only for the same turn budget, names and `epoch` (the caller bumps the epoch
    when a node's rendering changes: hide, unhide, revise), and only windows whose nodes are all
    settled are kept (a draft still being written may change)."""

    def __init__(self, maxsize: int = 4096) -> None:
        self.maxsize = maxsize
        self._items: dict[UUID, _Window] = {}

    def get(self, node_id: UUID, key: tuple[int, str, str, int]) -> _Window | None:
        window = self._items.get(node_id)
        return window if window is not None and window.key == key else None

    def put(self, node_id: UUID, window: _Window) -> None:
        if len(self._items) >= self.maxsize:
            del self._items[next(iter(self._items))]
        self._items[node_id] = window


UNSETTLED = ("writing", "waiting")


def assemble_context(
    card: CardData,
    settings: StorySettings,
    upward: Iterable[NodeView],
    cache: RenderCache,
    windows: WindowCache | None = None,
    epoch: int = 0,
    scene: SceneAt | None = None,
    load: Callable[[UUID], NodeView] | None = None,
    summarized: bool = True,
) -> Context:
    """Assemble the next-turn context from the path read leaf→root (`upward`, consumed lazily).

    Whole turns are taken newest first while they fit the budget; the first turn that does not fit
    and everything older is cut from this request (and reported). With `windows`, the walk stops at
    the nearest ancestor whose window is cached and extends it. The walk also stops at the last
    summarized node; `summarized=False` (the story has no summary anywhere) spares a cut context the
    walk further up that looks for one."""
    char, user = card.name, settings.user_name
    budget = max(settings.context_window - settings.reply_reserve, 0)
    system = build_system_prompt(card, user)
    tail_text = fill_macros(card.post_history_instructions, char, user)
    tail = f"【卡作者末端指令】{tail_text}" if tail_text else ""
    iterator = iter(upward)
    leaf = next(iterator, None)
    if leaf is None:
        raise ValueError("a context needs at least the root node")
    ends_with_user = leaf.kind == "user" and not leaf.hidden
    injected = _injection(scene, tail) if ends_with_user else []
    fixed = cache.count(system) + (cache.count(tail) if tail and ends_with_user else 0)
    key = (budget - fixed, char, user, epoch)
    walk = _Verbatim(_chain(leaf, iterator), summarized)
    window = _window(walk, key, cache, windows)
    if windows is not None and window.settled:
        windows.put(leaf.id, window)
    layers = layers_from(window.boundary, load) if window.boundary is not None and load is not None else NO_LAYERS
    summaries = [
        (block, cache.count_raw(block.text) + (MESSAGE_OVERHEAD_TOKENS if i == 0 else 0))
        for i, block in enumerate(summary_blocks(layers, load, char, user, fill_macros) if load else [])
    ]
    scene_tokens = sum(cache.count_raw(block.text) for block in injected if block.what != "instructions")
    extra = scene_tokens + sum(tokens for _, tokens in summaries)
    if extra:  # the scene and the summaries change as the story goes: fitted after the cached window
        window = _extend(window, [], (key[0] - extra, *key[1:]))
    used = fixed + extra + window.tokens
    return _build(
        system, summaries, layers.covered_depth, injected, list(window.kept), window.cut_at, leaf, ends_with_user,
        used, budget, cache,
    )  # fmt: skip


class _Verbatim:
    """The path leaf→root up to, not including, the first node that carries a summary (the boundary).
    `seek()` reads on, without rendering, to find the boundary above a budget cut — only when the story
    has summaries at all (`summarized`): a story without any is never walked to its root."""

    def __init__(self, nodes: Iterator[NodeView], summarized: bool) -> None:
        self.nodes, self.summarized = nodes, summarized
        self.boundary: NodeView | None = None
        self.done = False

    def __iter__(self) -> _Verbatim:
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


@dataclass(frozen=True, slots=True)
class _Injected:
    """A block put into the last user message, before the user's words."""

    what: str
    why: str
    text: str
    node_ids: tuple[UUID, ...] = ()


def _injection(scene: SceneAt | None, tail: str) -> list[_Injected]:
    """The tail blocks in their order: 【世界状态】, 【登场名录】, then the card's post-history instructions."""
    out = []
    if scene is not None:
        source = (UUID(scene.source_id),)
        why = f"the scene at this point of the path: {scene.patches} patch(es) folded up to node {scene.source_id}"
        out.append(_Injected("scene", why, f"【世界状态】\n{format_state(scene.snapshot)}", source))
        why = "everything that has appeared so far, with its first in-story time"
        out.append(_Injected("roster", why, f"【登场名录】{format_roster(scene.roster)}", source))
    if tail:
        out.append(_Injected("instructions", "card post-history instructions", tail))
    return out


def _window(
    upward: _Verbatim, key: tuple[int, str, str, int], cache: RenderCache, windows: WindowCache | None
) -> _Window:
    turn_budget, char, user, _ = key
    kept: list[Rendered] = []  # newest first
    turn: list[Rendered] = []
    turn_tokens = used = 0
    for node in upward:
        base = windows.get(node.id, key) if windows is not None else None
        if base is not None:
            return _extend(base, [*reversed(turn), *reversed(kept)], key)
        text, tokens = cache.render(node, char, user) if node.text and not node.hidden else ("", 0)
        message = Message("user" if node.kind == "user" else "assistant", text) if text else None
        turn.append((node, text, tokens, message))
        turn_tokens += tokens
        if node.kind in ("user", "greeting"):
            if kept and used + turn_tokens > turn_budget:
                kept.reverse()
                return _Window(key, tuple(kept), used, node, _settled(kept), upward.seek())
            kept.extend(turn)
            used += turn_tokens
            turn, turn_tokens = [], 0
    kept.extend(turn)  # only a hand-made gap leaves a turn without its user node
    used += turn_tokens
    kept.reverse()
    return _Window(key, tuple(kept), used, None, _settled(kept), upward.boundary)


def _settled(items: Iterable[Rendered]) -> bool:
    return not any(item[0].phase in UNSETTLED for item in items)


def _extend(base: _Window, below: list[Rendered], key: tuple[int, str, str, int]) -> _Window:
    """The base window with the nodes below it appended, then whole turns dropped from the front
    until the rest fits (the newest turn always stays)."""
    items = base.kept + tuple(below)
    tokens = base.tokens + sum(item[2] for item in below)
    starts = (i for i, item in enumerate(items) if item[0].kind in ("user", "greeting"))  # read only as far as cut
    cut_at, first = base.cut_at, 0
    for start, next_start in pairwise(starts):
        if tokens <= key[0]:
            break
        tokens -= sum(item[2] for item in items[start:next_start])
        cut_at, first = items[start][0], next_start
    return _Window(key, items[first:], tokens, cut_at, base.settled and _settled(below), base.boundary)


def _chain(first: NodeView, rest: Iterator[NodeView]) -> Iterator[NodeView]:
    yield first
    yield from rest


_NODE, _TEXT, _TOKENS = itemgetter(0), itemgetter(1), itemgetter(2)
_ROLE, _ID = attrgetter("role"), attrgetter("id")


def _build(
    system: str,
    summaries: list[tuple[SummaryBlock, int]],
    covered_depth: int,
    injected: list[_Injected],
    kept: list[Rendered],
    cut_at: NodeView | None,
    leaf: NodeView,
    ends_with_user: bool,
    used: int,
    budget: int,
    cache: RenderCache,
) -> Context:
    explain = [ExplainBlock("system", "card identity and user persona", (), len(system), cache.count(system), 0)]
    if cut_at is not None:
        why = f"over the token budget ({budget}): turns up to {cut_at.turn} left out of this request only"
        cut_depths = (covered_depth + 1, kept[0][0].depth - 1)  # everything between the summaries and the window
        explain.append(ExplainBlock("cut", why, (cut_at.id,), covers=cut_depths))
    for summary, tokens in summaries:
        explain.append(
            ExplainBlock(summary.what, summary.why, summary.node_ids, len(summary.text), tokens, 1, summary.covers)
        )
    messages = [Message("system", system)]
    verbatim: list[NodeView] = []
    hidden: list[UUID] = []
    chars = tokens_sum = 0
    walk, body = kept, kept[:-1] if ends_with_user else kept  # the leaf's own words are added last, below
    shown = [m for item in body if (m := item[3]) is not None]
    roles = list(map(_ROLE, shown)) if len(shown) == len(body) else []
    if roles and not any(map(eq, roles, islice(roles, 1, None))):
        # the usual path: every node shown, roles alternating (nothing to skip or merge), in bulk
        messages += shown
        if body[0][0].kind == "greeting":
            _, text, tokens, _ = body[0]
            explain.append(ExplainBlock("greeting", "the opening line", (body[0][0].id,), len(text), tokens))
            body = body[1:]
        verbatim = list(map(_NODE, body))
        chars = sum(map(len, map(_TEXT, body)))
        tokens_sum = sum(map(_TOKENS, body))
        walk = []
    for node, text, tokens, message in walk:
        if node.hidden:
            hidden.append(node.id)
            continue
        if message is None or (node is leaf and ends_with_user):
            continue
        if len(messages) > 1 and messages[-1].role == message.role:  # adjacent messages of one role become one
            messages[-1] = Message(message.role, messages[-1].content + "\n\n" + text)
        else:
            messages.append(message)  # made once per node when its turn entered a window
        if node.kind == "greeting":
            explain.append(ExplainBlock("greeting", "the opening line", (node.id,), len(text), tokens))
        else:
            verbatim.append(node)
            chars += len(text)
            tokens_sum += tokens
    if verbatim:
        why = f"turns {verbatim[0].turn}–{verbatim[-1].turn} word for word"
        explain.append(ExplainBlock("verbatim", why, tuple(map(_ID, verbatim)), chars, tokens_sum))
    if hidden:
        explain.append(ExplainBlock("hidden", "hidden by the user: in the tree, not in the context", tuple(hidden)))
    if summaries:  # one user message right after the system prompt
        messages.insert(1, Message("user", "\n\n".join(summary.text for summary, _ in summaries)))
    if ends_with_user:
        _, words, tokens, _ = kept[-1]  # the leaf's turn is always kept, and the leaf ends it
        content = "\n\n".join([*(block.text for block in injected), words])
        if len(messages) > 1 and messages[-1].role == "user":
            messages[-1] = Message("user", messages[-1].content + "\n\n" + content)
        else:
            messages.append(Message("user", content))
        last = len(messages) - 1
        for block in injected:
            counted = cache.count(block.text) if block.what == "instructions" else cache.count_raw(block.text)
            explain.append(ExplainBlock(block.what, block.why, block.node_ids, len(block.text), counted, last))
        explain.append(ExplainBlock("user", "the user's words, last", (leaf.id,), len(words), tokens, last))
    cut_turns, cut_nodes = (cut_at.turn, kept[0][0].depth - 1 - covered_depth) if cut_at else (0, 0)
    return Context(tuple(messages), tuple(explain), used, budget, leaf.id, cut_turns, cut_nodes)
