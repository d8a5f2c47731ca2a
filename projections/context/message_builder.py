"""The messages of a context and its explain list, built block by block in order: the system prompt, the
summary layers, the greeting and the verbatim path (alternating, or merged where a front end's roles
repeat), the blocks before the user's words in the last user message, and lore placed in the chat."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import islice
from operator import attrgetter, eq, itemgetter
from uuid import UUID

from domain.tree.rules.compaction import Layers
from domain.values import NodeView
from projections.context.records import Context, DepthBlock, ExplainBlock, Message, TailBlock
from projections.context.summary_fit import CountedSummary
from projections.context.window import (
    MESSAGE,
    NODE,
    TEXT,
    TOKENS,
    RenderCache,
    Rendered,
)

_ROLE, _ID = attrgetter("role"), attrgetter("id")
_NODE, _TEXT, _TOKENS, _MESSAGE = itemgetter(NODE), itemgetter(TEXT), itemgetter(TOKENS), itemgetter(MESSAGE)


SUMMARY_KINDS = frozenset({"prelude", "digest", "episode", "anchors", "resident"})
SIDE_ORDER = {"assistant": 0, "user": 1, "system": 2}  # lore at one depth, as SillyTavern orders it


def shifted(block: ExplainBlock, by: int, message: int = 1, at: int = 0) -> ExplainBlock:
    """A block after `by` characters were put into `message` at offset `at` (its span moves where it starts or
    ends in that message, from there on)."""
    if block.span is None or block.message_index is None:
        return block
    start, end = block.span
    moved = block.message_index == message and start >= at
    start += by if moved else 0
    end += by if block.end_message == message and (end > at or (moved and end == at)) else 0
    return replace(block, span=(start, end))


@dataclass
class Assembly:
    """The messages and the explain list, built block by block in order."""

    cache: RenderCache
    budget: int
    messages: list[Message] = field(default_factory=list)
    explain: list[ExplainBlock] = field(default_factory=list)

    def open(
        self,
        system: str,
        summaries: list[CountedSummary],
        cut_at: NodeView | None,
        covered_depth: int,
        kept: tuple[Rendered, ...],
    ) -> None:
        """The system prompt, then the explain blocks of a budget cut and of the summary layers."""
        self.messages.append(Message("system", system))
        self.explain.append(
            ExplainBlock(
                "system", "card identity and user persona", (), len(system), self.cache.count(system), 0,
                span=(0, len(system)), end_message=0,
            )
        )  # fmt: skip
        if cut_at is not None:
            why = f"over the token budget ({self.budget}): turns up to {cut_at.turn} left out of this request only"
            cut_depths = (covered_depth + 1, kept[0][NODE].depth - 1)  # everything between the summaries and the window
            self.explain.append(ExplainBlock("cut", why, (cut_at.id,), covers=cut_depths))
        for summary in summaries:
            block = summary.block
            self.explain.append(
                ExplainBlock(
                    block.what, block.why, block.node_ids, len(block.text), summary.tokens, 1, block.covers,
                    version=block.version,
                )
            )  # fmt: skip

    def add_path(self, body: tuple[Rendered, ...], leaf: NodeView | None) -> None:
        """The greeting and the verbatim turns; `leaf`, if given, is left for `add_leaf`."""
        shown = [m for m in map(_MESSAGE, body) if m is not None]
        roles = list(map(_ROLE, shown)) if len(shown) == len(body) else []
        if roles and not any(map(eq, roles, islice(roles, 1, None))):
            self._add_alternating(body, shown)
        else:
            self._add_merging(body, leaf)

    def _add_alternating(self, body: tuple[Rendered, ...], shown: list[Message]) -> None:
        """The usual path: every node shown, roles alternating (nothing to skip or merge), in bulk."""
        first = len(self.messages)
        self.messages += shown
        if body[0][NODE].kind == "greeting":
            self._greeting(*body[0][:3], first)
            body, first = body[1:], first + 1
        nodes = list(map(_NODE, body))
        last = len(self.messages) - 1
        where = ((first, 0), (last, len(self.messages[last].content)))
        self._verbatim(nodes, sum(map(len, map(_TEXT, body))), sum(map(_TOKENS, body)), where)

    def _add_merging(self, body: tuple[Rendered, ...], leaf: NodeView | None) -> None:
        """Hidden nodes left out (and listed), adjacent messages of one role merged into one."""
        verbatim: list[NodeView] = []
        hidden: list[UUID] = []
        chars = tokens = 0
        start: tuple[int, int] | None = None  # (message, offset) where the verbatim turns begin
        end = (0, 0)
        for node, text, item_tokens, message in body:
            if node.hidden:
                hidden.append(node.id)
                continue
            if message is None or node is leaf:
                continue
            if len(self.messages) > 1 and self.messages[-1].role == message.role:
                offset = len(self.messages[-1].content) + 2
                self.messages[-1] = Message(message.role, self.messages[-1].content + "\n\n" + text)
            else:
                offset = 0
                self.messages.append(message)  # made once per node when its turn entered a window
            at = len(self.messages) - 1
            if node.kind == "greeting":
                self._greeting(node, text, item_tokens, at, offset)
            else:
                start = (at, offset) if start is None else start
                end = (at, len(self.messages[at].content))
                verbatim.append(node)
                chars += len(text)
                tokens += item_tokens
        if start is not None:
            self._verbatim(verbatim, chars, tokens, (start, end))
        if hidden:
            self.explain.append(
                ExplainBlock("hidden", "hidden by the user: in the tree, not in the context", tuple(hidden))
            )

    def _greeting(self, node: NodeView, text: str, tokens: int, index: int, offset: int = 0) -> None:
        span = (offset, offset + len(text))
        self.explain.append(
            ExplainBlock(
                "greeting", "the opening line", (node.id,), len(text), tokens, index, span=span, end_message=index
            )
        )

    def _verbatim(
        self, nodes: list[NodeView], chars: int, tokens: int, where: tuple[tuple[int, int], tuple[int, int]]
    ) -> None:
        """The turns word for word, from (message, offset) to (message, offset) `where`."""
        if nodes:
            (first, start), (last, end) = where
            why = f"turns {nodes[0].turn}–{nodes[-1].turn} word for word"
            self.explain.append(
                ExplainBlock(
                    "verbatim", why, tuple(map(_ID, nodes)), chars, tokens, first, span=(start, end), end_message=last
                )
            )

    def add_summaries(self, summaries: list[CountedSummary]) -> None:
        """One user message right after the system prompt; when the verbatim path opens with the user's
        words, they follow in the same message (roles alternate: strict providers refuse two user
        messages in a row)."""
        if not summaries:
            return
        text = "\n\n".join(summary.block.text for summary in summaries)
        path = ("greeting", "verbatim")
        if len(self.messages) > 1 and self.messages[1].role == "user":
            self.messages[1] = Message("user", text + "\n\n" + self.messages[1].content)
            self.explain = [shifted(b, len(text) + 2) if b.what in path else b for b in self.explain]
        else:
            self.messages.insert(1, Message("user", text))
            self.explain = [  # the path's blocks moved one message down
                replace(b, message_index=b.message_index + 1, end_message=(b.end_message or 0) + 1)
                if b.message_index is not None and b.what in path
                else b
                for b in self.explain
            ]
        spans, offset = [], 0
        for summary in summaries:
            spans.append((offset, offset + len(summary.block.text)))
            offset += len(summary.block.text) + 2
        placed = iter(spans)
        self.explain = [
            replace(b, span=next(placed), end_message=1)
            if b.what in SUMMARY_KINDS and b.message_index is not None  # (a resident summary left out: none)
            else b
            for b in self.explain
        ]

    def add_leaf(self, tails: list[TailBlock], leaf: Rendered) -> None:
        """The last user message: the tail blocks, then the user's words."""
        node, words, tokens, _ = leaf
        content = "\n\n".join([*(block.text for block in tails), words])
        if len(self.messages) > 1 and self.messages[-1].role == "user":
            offset = len(self.messages[-1].content) + 2
            self.messages[-1] = Message("user", self.messages[-1].content + "\n\n" + content)
        else:
            offset = 0
            self.messages.append(Message("user", content))
        last = len(self.messages) - 1
        for block in tails:
            if block.tokens is not None:
                counted = block.tokens
            elif block.what == "instructions":
                counted = self.cache.count(block.text)
            else:
                counted = self.cache.count_raw(block.text)
            span = (offset, offset + len(block.text))
            self.explain.append(
                ExplainBlock(
                    block.what, block.why, block.node_ids, len(block.text), counted, last, scores=block.scores,
                    span=span, end_message=last, lore=block.lore, memory=block.memory,
                )
            )  # fmt: skip
            offset = span[1] + 2
        span = (offset, offset + len(words))
        self.explain.append(
            ExplainBlock(
                "user", "the user's words, last", (node.id,), len(words), tokens, last, span=span, end_message=last
            )
        )

    def add_in_chat(self, blocks: list[DepthBlock]) -> None:
        """Lore placed in the chat, each block `depth` messages from the end (0: after the last): at the start
        of the message there when it is of the block's side (a reply for assistant texts, a user message for
        the others), else at the end of the one before it, else at the start of the next one of its side —
        roles keep alternating, and the system prompt stays as it is."""
        fronts: dict[int, int] = {}  # message → where the next block at its start goes (after the deeper ones)
        for block in sorted(blocks, key=lambda b: (-b.depth, SIDE_ORDER.get(b.role, 2))):
            count = len(self.messages)
            side = "assistant" if block.role == "assistant" else "user"
            point = min(max(count - block.depth, 1), count)  # before message `point`
            after = next((i for i in range(point, count) if self.messages[i].role == side), None)
            before = next((i for i in range(point - 1, 0, -1) if self.messages[i].role == side), None)
            if after == point or (after is not None and before is None):
                at, front = after, True
            elif before is not None:
                at, front = before, False
            else:  # (no message of its side at all: the last one)
                at, front = count - 1, False
            message = self.messages[at]
            if front:  # (after the blocks put there before it: the deeper first, then assistant, user, system)
                offset = fronts.get(at, self._after_summaries(at))
                content = message.content
                self.messages[at] = Message(message.role, content[:offset] + block.text + "\n\n" + content[offset:])
                self.explain = [shifted(b, len(block.text) + 2, at, offset) for b in self.explain]
                span = (offset, offset + len(block.text))
                fronts[at] = span[1] + 2
            else:
                self.messages[at] = Message(message.role, message.content + "\n\n" + block.text)
                span = (len(message.content) + 2, len(message.content) + 2 + len(block.text))
            why = (
                block.why if message.role == side else f"{block.why} (no {side} message there: in the {message.role}'s)"
            )
            self.explain.append(
                ExplainBlock(
                    "lore_in_chat", why, (), len(block.text), self.cache.count_raw(block.text), at, span=span,
                    end_message=at, lore=block.lore,
                )
            )  # fmt: skip

    def _after_summaries(self, message: int) -> int:
        """Where a message's own text starts: after the summary layers it opens with (message 1)."""
        ends = [b.span[1] for b in self.explain if b.what in SUMMARY_KINDS and b.message_index == message and b.span]
        return max(ends) + 2 if ends else 0

    def context(
        self, leaf: NodeView, used: int, cut_at: NodeView | None, layers: Layers, kept: tuple[Rendered, ...]
    ) -> Context:
        """`cut_turns` counts the whole turns the budget left out (between the summaries and the window)."""
        if cut_at is None:
            cut_turns = cut_nodes = 0
        else:
            cut_turns = cut_at.turn - layers.covered_turn
            cut_nodes = kept[0][NODE].depth - 1 - layers.covered_depth
        return Context(tuple(self.messages), tuple(self.explain), used, self.budget, leaf.id, cut_turns, cut_nodes)
