"""Where a front end's chat lies in the story tree, wherever the front end cut it: the runs of its messages
found one after another on a path (by their `link`s, a read model), read against the path that holds the
most of the chat from its first message, and told apart from another chat of the same card."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from uuid import UUID

from domain.application import Changji
from domain.tree.rules.reconcile import Anchor, ChatMessage, Decision, SplitRequest, anchors, decide, links, same_words
from domain.tree.story import Story
from domain.values import NodeView
from projections.read_models.store import ReadModels
from service.proxy_requests import ChatDigests, ProxyRequest
from service.views import StoryViews

SAME_CARD, OTHER_CARD = 2, 4  # path messages a chat must repeat (the greeting first) to continue a story
ALIKE = 0.6  # of the shorter system text (by its lines' length), in lines the other has too: the same card
FOUND_ROWS = 2_000  # nodes a chat's links find, at most (the most recently changed stories' first)
ANCHORS_TRIED = 8  # runs of a chat's messages found in the tree that are read against, at most


@dataclass(frozen=True, slots=True)
class Chosen:
    """The story a request continues, its path root→leaf, and what the request means for it."""

    story_id: UUID
    path: tuple[NodeView, ...]
    split: SplitRequest
    decision: Decision
    digests: ChatDigests | None = None


class Prompt:
    """A request's system text: the card it makes, and its lines (to tell a story's much like it)."""

    def __init__(self, card_id: UUID, fixed: Sequence[str]) -> None:
        self.card_id = card_id
        self._lines = _lines(fixed)
        self._size = sum(self._lines.values())

    def overlap(self, fixed: Sequence[str]) -> float:
        """The share of the shorter of the two texts in lines both have (0: either is empty)."""
        other = _lines(fixed)
        shorter = min(self._size, sum(other.values()))
        return sum(n for line, n in other.items() if line in self._lines) / shorter if shorter else 0.0


def _lines(fixed: Sequence[str]) -> dict[str, int]:
    return {line.strip(): len(line.strip()) for text in fixed for line in text.splitlines() if line.strip()}


class ChatFinder:
    def __init__(self, app: Changji, views: StoryViews, store: ReadModels) -> None:
        self.app, self.views, self.store = app, views, store

    def found(self, tenant_id: str, request: ProxyRequest, card: Prompt, hint: UUID | None) -> Chosen | None:
        """The request read where its chat lies in the tree, wherever the front end cut it: the runs of its
        messages found one after another on a path (by their `link`s, kept as a read model), the one that
        holds the chat from its first message furthest first; the path up to its end, from the node before
        the chat's first message (or the chat's greeting, the story's own), is what the chat is read
        against (`decide`). Costs what the chat holds, never what the story does."""
        split = request.split
        opens = split.greeting is not None
        said = [ChatMessage("assistant", split.greeting or ""), *split.chat] if opens else list(split.chat)
        found = self.store.linked(tenant_id, links(said, opens), hint, FOUND_ROWS + 2 * len(said))
        runs = _few_per_story(anchors(found))[:ANCHORS_TRIED]
        tried = [(anchor, self.app.story(tenant_id, UUID(anchor.story_id))) for anchor in runs]
        rank = {(a.start, a.at): i for i, a in reversed(list(enumerate(runs)))}
        tried.sort(key=lambda t: (rank[t[0].start, t[0].at], t[1].card_id != card.card_id))  # a run alike: its card's
        for anchor, story in tried:
            aligned = self._aligned(anchor, opens, split, story)
            if aligned is None:
                continue
            path, read = aligned
            if hint is None and _held(anchor, path, opens, said) < self.enough(story, card, split):
                continue  # (another card's story: a run of a few messages is not enough)
            if path[0].kind == "greeting" and not self._same_chat(story, path, anchor, opens, split, card, hint):
                continue
            return Chosen(story.id, path, split, decide(read, path_messages(path)), request.digests)
        return None

    def _aligned(
        self, anchor: Anchor, opens: bool, split: SplitRequest, story: Story
    ) -> tuple[tuple[NodeView, ...], SplitRequest] | None:
        """The path a chat is read against, from its anchor up — the node of its first message (or, when
        the chat does not start with an assistant message, the one before it) down to the anchor's — and
        the chat as it is read there (None: the tree has fewer nodes above the anchor than the chat has
        messages before it). A chat that opens with the story's greeting but whose run does not reach it
        (a message deleted or added above the run) is read against the whole path from the greeting; a
        cut chat whose oldest message, a reply, was edited is read with that reply as one of its messages.
        (A chat that keeps the greeting and is cut after it is read from the node before its first message
        after the greeting, the greeting standing for the story's.)"""
        node = self.app.node(UUID(anchor.node_id))
        path = [node]
        for _ in range(anchor.at if opens else anchor.at + 1):
            if node.parent_id is None:
                return None
            node = self.app.node(node.parent_id)
            path.append(node)
        path.reverse()
        first, greeting = path[0], split.greeting or ""
        if not opens or first.kind == "greeting" or same_words(first.text, greeting):
            return tuple(path), split
        assert story.root_id is not None and story.leaf_id is not None
        root = self.app.node(story.root_id)
        if same_words(root.text, greeting):  # the story's greeting: it opens the chat, or stands for it
            if split.chat and self.child(root, split.chat[0]) is not None:
                return tuple(self.views.path(story.tenant_id, story.id, UUID(anchor.node_id), None)), split
            return tuple(path), split
        if first.parent_id is None:
            return None
        moved = replace(split, greeting=None, chat=(ChatMessage("assistant", greeting), *split.chat))
        return (self.app.node(first.parent_id), *path), moved

    def _same_chat(
        self, story: Story, path: Sequence[NodeView], anchor: Anchor, opens: bool, split: SplitRequest,
        card: Prompt, hint: UUID | None,
    ) -> bool:  # fmt: skip
        """Whether a chat that opens with a story's greeting is that story's chat, not another chat of the
        same card: it repeats one of the story's replies — what a model wrote is the chat's own — or, when
        it repeats only the greeting and the first words, the story has nothing past them but a reply (a
        swipe of the first reply) and the request is the same card's. A chat whose first words differ
        continues the story only when it repeats a reply after them (an edit of the first words). (A chat
        with no greeting is read as opening with the story's empty one.)"""
        at = anchor.at if opens else anchor.at + 1
        if hint is not None or at >= 2:
            return True
        if at == 0 or len(split.chat) != 1:
            return False
        words = path[-1]
        if any(self.store.children(UUID(reply["id"])) for reply in self.store.children(words.id)):
            return False  # the story went on past its first turn: a new chat of the same card
        return self.enough(story, card, split) <= SAME_CARD

    def enough(self, story: Story, card: Prompt, split: SplitRequest) -> int:
        """How many of a story's path messages, the greeting counted, a chat must repeat to go on in it:
        two for the request's card (the greeting and the first words); for a story the last request
        relayed into had much the same system text (a front end's lore comes and goes in it), two where
        the chat opens with the story's greeting and three without (the first reply too: two cards
        sharing a preset share much of their system text, not their greeting or their replies); four for
        another card's."""
        if story.card_id == card.card_id:
            return SAME_CARD
        assert story.leaf_id is not None and story.root_id is not None
        part = self.views.noted_part(self.app.node(story.leaf_id))
        if part is None or card.overlap(part.fixed) < ALIKE:
            return OTHER_CARD
        greeting = (split.greeting or "").strip()
        return SAME_CARD if greeting and greeting == self.app.node(story.root_id).text.strip() else SAME_CARD + 1

    def child(self, parent: NodeView, message: ChatMessage) -> NodeView | None:
        """The shown child of `parent` that says `message` (a final or sealed node), if there is one."""
        kind = "user" if message.role == "user" else "reply"
        for row in self.store.children(parent.id):
            if row["kind"] == kind and not row["hidden"]:
                node = self.app.node(UUID(row["id"]))
                if same_words(node.text, message.text) and node.phase in ("final", "sealed"):
                    return node
        return None


def _few_per_story(runs: Sequence[Anchor], most: int = 2) -> list[Anchor]:
    """The best runs of each story, in their order (runs alike in many stories — a card's greeting and
    common first words — would otherwise crowd out a story's own)."""
    seen: dict[str, int] = {}
    kept = []
    for run in runs:
        seen[run.story_id] = seen.get(run.story_id, 0) + 1
        if seen[run.story_id] <= most:
            kept.append(run)
    return kept


def _held(anchor: Anchor, path: Sequence[NodeView], opens: bool, said: Sequence[ChatMessage]) -> int:
    """How many of a story's messages a run of a chat repeats: the story's empty greeting counted when a
    chat with none starts where the story does; the user's last words not counted when the chat was cut
    (words alone are not a story's)."""
    held = anchor.at - anchor.start + 1
    if path[0].kind == "greeting" and anchor.start == 0:
        return held + (not opens)
    return held - (anchor.at == len(said) - 1 and said[-1].role == "user")


def path_messages(path: Sequence[NodeView]) -> list[ChatMessage]:
    return [ChatMessage("user" if node.kind == "user" else "assistant", node.text) for node in path]
