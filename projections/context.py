"""The context for the next turn: OpenAI `messages` plus an explain list of where every part came from.

v1 layers: the system prompt built from the card, the greeting, the verbatim path (hidden nodes left
out) and the card's post-history instructions just before the user's words. The path is walked from
the leaf upward only as far as the token budget (window − reply reserve) allows, so the cost of an
assembly depends on the window, never on the story's length. A cut is reported, never silent.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal
from uuid import UUID

from domain.ports import TokenCounter
from domain.values import CardData, NodeView, StorySettings

Role = Literal["system", "user", "assistant"]
MESSAGE_OVERHEAD_TOKENS = 4
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
    changes only when the node itself does, so an assembly re-counts only what is new."""

    def __init__(self, counter: TokenCounter, maxsize: int = 200_000) -> None:
        self.counter = counter
        self.maxsize = maxsize
        self._items: OrderedDict[tuple[UUID, int, str, str], tuple[str, int]] = OrderedDict()

    def render(self, node: NodeView, char: str, user: str) -> tuple[str, int]:
        key = (node.id, node.version, char, user)
        hit = self._items.get(key)
        if hit is None:
            text = fill_macros(node.text, char, user)
            hit = (text, self.counter.count(text) + MESSAGE_OVERHEAD_TOKENS)
            self._items[key] = hit
            if len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return hit

    def count(self, text: str) -> int:
        return self.counter.count(text) + MESSAGE_OVERHEAD_TOKENS


@dataclass
class _Turn:
    """A run of path nodes from one user node up to (not including) the next one."""

    nodes: list[NodeView] = field(default_factory=list)
    tokens: int = 0


def _turns(upward: Iterable[NodeView]) -> Iterator[_Turn]:
    """Group leaf→root nodes into turns (newest first); each turn is returned oldest-node first."""
    turn = _Turn()
    for node in upward:
        turn.nodes.append(node)
        if node.kind in ("user", "greeting"):
            turn.nodes.reverse()
            yield turn
            turn = _Turn()
    if turn.nodes:
        turn.nodes.reverse()
        yield turn


def _role(node: NodeView) -> Role:
    return "user" if node.kind == "user" else "assistant"


def _merged(messages: list[Message]) -> list[Message]:
    """Adjacent messages of one role become one, joined by a blank line."""
    out: list[Message] = []
    for m in messages:
        if out and out[-1].role == m.role and m.role != "system":
            out[-1] = Message(m.role, out[-1].content + "\n\n" + m.content)
        else:
            out.append(m)
    return out


def assemble_context(
    card: CardData,
    settings: StorySettings,
    upward: Iterable[NodeView],
    cache: RenderCache,
) -> Context:
    """Assemble the next-turn context from the path read leaf→root (`upward`, consumed lazily)."""
    char, user = card.name, settings.user_name
    budget = max(settings.context_window - settings.reply_reserve, 0)
    system = build_system_prompt(card, user)
    system_tokens = cache.count(system)
    tail_text = fill_macros(card.post_history_instructions, char, user)
    tail = f"【卡作者末端指令】{tail_text}" if tail_text else ""
    used = system_tokens + (cache.count(tail) if tail else 0)

    iterator = iter(upward)
    kept: list[_Turn] = []
    cut_at: NodeView | None = None
    leaf: NodeView | None = None
    for turn in _turns(iterator):
        leaf = leaf or turn.nodes[-1]
        turn.tokens = sum(cache.render(n, char, user)[1] for n in turn.nodes if not n.hidden and n.text)
        if used + turn.tokens > budget and kept:
            cut_at = turn.nodes[-1]
            break
        used += turn.tokens
        kept.append(turn)
    if leaf is None:
        raise ValueError("a context needs at least the root node")
    kept.reverse()
    return _build(system, system_tokens, tail, kept, cut_at, leaf, used, budget, cache, char, user)


def _build(
    system: str,
    system_tokens: int,
    tail: str,
    kept: list[_Turn],
    cut_at: NodeView | None,
    leaf: NodeView,
    used: int,
    budget: int,
    cache: RenderCache,
    char: str,
    user: str,
) -> Context:
    explain = [ExplainBlock("system", "card identity and user persona", (), len(system), system_tokens, 0)]
    if cut_at is not None:
        why = f"over the token budget ({budget}): turns up to {cut_at.turn} left out of this request only"
        explain.append(ExplainBlock("cut", why, (cut_at.id,)))
    ends_with_user = leaf.kind == "user" and not leaf.hidden
    body: list[Message] = []
    verbatim: list[NodeView] = []
    hidden: list[UUID] = []
    for node in (n for turn in kept for n in turn.nodes):
        if node.hidden:
            hidden.append(node.id)
        elif node.text and not (node is leaf and ends_with_user):
            text, tokens = cache.render(node, char, user)
            body.append(Message(_role(node), text))
            if node.kind == "greeting":
                explain.append(ExplainBlock("greeting", "the opening line", (node.id,), len(text), tokens))
            else:
                verbatim.append(node)
    if verbatim:
        rendered = [cache.render(n, char, user) for n in verbatim]
        why = f"turns {verbatim[0].turn}–{verbatim[-1].turn} word for word"
        ids = tuple(n.id for n in verbatim)
        explain.append(
            ExplainBlock("verbatim", why, ids, sum(len(t) for t, _ in rendered), sum(k for _, k in rendered))
        )
    if hidden:
        explain.append(ExplainBlock("hidden", "hidden by the user: in the tree, not in the context", tuple(hidden)))
    if ends_with_user:
        words, tokens = cache.render(leaf, char, user)
        body.append(Message("user", f"{tail}\n\n{words}" if tail else words))
        if tail:
            explain.append(
                ExplainBlock("instructions", "card post-history instructions", (), len(tail), cache.count(tail))
            )
        explain.append(ExplainBlock("user", "the user's words, last", (leaf.id,), len(words), tokens))
    messages = (Message("system", system), *_merged(body))
    if ends_with_user:
        last = len(messages) - 1
        explain = [
            ExplainBlock(b.what, b.why, b.node_ids, b.chars, b.tokens, last)
            if b.what in ("instructions", "user")
            else b
            for b in explain
        ]
    if not ends_with_user:
        used -= cache.count(tail) if tail else 0
    cut_turns, cut_nodes = (cut_at.turn, cut_at.depth + 1) if cut_at else (0, 0)
    return Context(messages, tuple(explain), used, budget, leaf.id, cut_turns, cut_nodes)
