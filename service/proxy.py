"""The chat-completions proxy's work on the story side (the HTTP side is `api/handlers/proxy.py`): which
story a request continues, what it means for the tree (`domain/tree/rules/reconcile.py`), the messages the
upstream gets instead of the front end's history, and the reply recorded when the upstream has answered.

Which story, in this order: the `X-Changji-Story` header; the request's `user` field when it names a
story of the tenant; else the tenant's most recent story (of the last CANDIDATES) whose path the chat
continues furthest — beyond its greeting —; else a new story, on a card made from the request's system
messages (the same system text gives the same card).

What the upstream gets: the client's fixed prompt as it sent it (the client is the authority on its
card), then changji's context at the user's words — the summary layers, recall, the scene and the
verbatim window — with the client's own system blocks from inside its chat (an author's note, its
summaries or vector blocks) right before the user's words, as they came."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid4, uuid5

import orjson

from domain.aggregates import Written
from domain.application import Changji
from domain.card.card import Card
from domain.errors import CardNotFoundError, StoryNotFoundError
from domain.tree.rules.reconcile import (
    Append,
    ChatMessage,
    Continue,
    PassThrough,
    Regenerate,
    SplitRequest,
    decide,
    message_text,
    own_request,
)
from domain.tree.story import Story
from domain.values import CardData, NodeKind, NodeView, StorySettings
from projections.context.records import Context
from projections.context.relayed import CLIENT_PART_TYPE, TEXT_TYPE, ClientPart
from projections.read_models.store import ReadModels
from service.chat_finder import OTHER_CARD, ChatFinder, Chosen, Prompt, path_messages
from service.proxy_memory import with_card_memory
from service.proxy_requests import ChatDigests, ProxyRequest, RequestReader
from service.views import StoryViews

CANDIDATES = 50
KNOWN = 200_000  # nodes whose chat digest the proxy keeps
CARD_HOPS = 64  # merges followed from the card a request makes to the card it is on now
KEPT_PARTS = 1024  # blobs of client parts (their texts, their manifests) the proxy knows are kept
PROXY_CARDS = uuid5(NAMESPACE_URL, "https://changji.dev/proxy/cards")


@dataclass(frozen=True, slots=True)
class Opened:
    """A turn the request opened: its user node and its reply (being written), and what the reply starts
    with (a prefill, or the reply being continued)."""

    user_id: UUID
    reply_id: UUID
    starts_with: str
    continues: UUID | None = None


@dataclass(frozen=True, slots=True)
class Planned:
    """What a request records once the upstream has answered: the turn it opens, its ids chosen before the
    call; for new messages, where they go (`parent_id`), what they say and their ids (the reply's last),
    and their views (`nodes`: the context is assembled on them before they are saved); `regenerate`: a new
    reply under the user node that is there already."""

    opened: Opened
    parent_id: UUID | None = None
    said: tuple[tuple[NodeKind, str], ...] = ()
    ids: tuple[UUID, ...] = ()
    nodes: tuple[NodeView, ...] = ()
    regenerate: bool = False


class ChatProxy:
    """Keeps, for nodes it has seen a front end's chat reach, a digest of that chat up to them (`_known`:
    node → (messages, digest)): a request whose chat up to the story's leaf (or its user node) has that
    digest is the path's continuation, told without walking the path — the front end sends its whole
    history each time, and the walk would grow with it. Other requests are read against the whole path."""

    def __init__(
        self,
        app: Changji,
        views: StoryViews,
        store: ReadModels,
        put_blob: Callable[[bytes, str], str],
        budget_rule: str = "client",
    ) -> None:
        self.app, self.views, self.store, self._put_blob = app, views, store, put_blob
        self.budget_rule = budget_rule  # what a story on `auto` fits its proxied contexts to: client | story
        self._parts: dict[str, None] = {}  # the blobs of client parts kept already (oldest first)
        self._known: dict[UUID, tuple[int, bytes]] = {}
        self._remembering = threading.Lock()  # (readers run on several threads)
        self.requests = RequestReader()
        self.finder = ChatFinder(app, views, store)

    def choose(self, tenant_id: str, request: ProxyRequest, hint: UUID | None) -> Chosen | None:
        """The story and the decision (None: a new story is wanted). A read."""
        split, digests = request.split, request.digests
        card = Prompt(self._card_id(tenant_id, split), split.fixed)
        for story_id in [hint] if hint is not None else self.store.recent_stories(tenant_id, CANDIDATES):
            quick = self._continued(tenant_id, story_id, split, digests, card)
            if quick is not None:
                return quick
        found = self.finder.found(tenant_id, request, card, hint)
        if found is not None or hint is None:
            return found
        story = self.app.story(tenant_id, hint)  # the story named: the request is read against its path
        path = self._path(story)
        return Chosen(story.id, path, split, decide(split, path_messages(path)), digests)

    def passing(self, request: ProxyRequest) -> PassThrough | None:
        """A request the front end makes for itself (a summary, an impersonation: nothing to record),
        told from the request alone; None when it is for a story."""
        return own_request(request.split)

    def _card_id(self, tenant_id: str, split: SplitRequest) -> UUID:
        """The card a request's system messages make, or the card it was merged into (a card the user
        imported of the same character); where the user deleted it, the next card of the same text (one
        the next new story makes)."""
        made = merges = 0
        card_id = _card_id(tenant_id, split, made)
        while True:
            try:
                card = self.app.get(Card, card_id, CardNotFoundError)
            except CardNotFoundError:  # (not made yet: the next new story makes it)
                break
            if card.merged_into is not None and merges < CARD_HOPS:
                merges += 1
                card_id = card.merged_into
            elif card.deleted:  # (each card of the text made anew has an id of its own: this ends)
                made += 1
                card_id = _card_id(tenant_id, split, made)
            else:
                break
        return card_id

    def start(
        self, tenant_id: str, request: ProxyRequest, names: tuple[str, str], model: str
    ) -> Written[tuple[Chosen, Opened | None]]:
        """A new story for a request no story continues, on the card its system messages make, with the turn
        the request opens in it (once the upstream has answered: a request that fails makes no story)."""
        split = request.split
        fixed = "\n\n".join(split.fixed)
        card_id = self._card_id(tenant_id, split)
        char, user = names
        if not self.app.exists(Card, card_id):
            data = CardData(name=char[:200] or "Assistant", description=fixed[:200_000], first_mes=split.greeting or "")
            self.app.cards.create_card(
                card_id, tenant_id, data, StorySettings().merged({"user_name": user[:100] or "User"})
            )
        story_id, root_id = uuid4(), uuid4()
        known = self.app.card(tenant_id, card_id).settings.user_name  # (another card's, where it was merged)
        own = {"user_name": user[:100]} if user and user[:100] != known else {}
        position = self.app.stories.start_story(story_id, root_id, tenant_id, card_id, 0, "", own)
        if split.greeting is not None and split.greeting != self.app.node(root_id).text:
            greeting = split.greeting
            position = self.app.nodes.revise_reply(
                tenant_id, root_id, greeting, "the greeting the front end shows"
            ).position
        story = self.app.story(tenant_id, story_id)
        path = self._path(story)
        chosen = Chosen(story.id, path, split, decide(split, path_messages(path)), request.digests)
        planned = self.plan(tenant_id, chosen)
        if planned is None:
            return Written((chosen, None), position)
        opened = self.open(tenant_id, chosen, planned, model)
        return Written((chosen, opened.value), max(position, opened.position))

    def plan(self, tenant_id: str, chosen: Chosen) -> Planned | None:
        """What the decision will record once the upstream has answered — the turn's ids chosen now, the
        nodes it adds checked and made as views (the context is assembled on them) — and nothing saved;
        None: nothing to record. A read."""
        decision, path = chosen.decision, chosen.path
        if isinstance(decision, Append):
            parent, messages = self._existing(path[decision.parent], decision.messages)
            if not messages[:-1] and messages[-1].role == "user":
                same = self.finder.child(parent, messages[-1])
                if same is not None:  # the user's words are in the tree already (another branch): a swipe there
                    return Planned(Opened(same.id, uuid4(), ""), regenerate=True)
            said: tuple[tuple[NodeKind, str], ...] = tuple(
                ("user" if m.role == "user" else "reply", m.text) for m in messages
            )
            ids = tuple(uuid4() for _ in range(len(said) + 1))
            nodes = self.app.turns.plan_relayed_turn(tenant_id, chosen.story_id, parent.id, said, ids)
            starts = messages[-1].text if messages[-1].role == "assistant" else ""
            user_id = nodes[-1].id if nodes else parent.id
            return Planned(Opened(user_id, ids[-1], starts), parent.id, said, ids, nodes)
        if isinstance(decision, Regenerate):
            return Planned(Opened(path[decision.user].id, uuid4(), ""), regenerate=True)
        if isinstance(decision, Continue):
            reply = path[decision.reply]
            assert reply.parent_id is not None
            return Planned(Opened(reply.parent_id, reply.id, decision.text, continues=reply.id))
        return None

    def open(self, tenant_id: str, chosen: Chosen, planned: Planned, model: str) -> Written[Opened]:
        """What `plan` planned, written in one command, once the upstream has answered."""
        split, opened = chosen.split, planned.opened
        if opened.continues is not None:  # (a continue adds to its reply when the words are in)
            return Written(opened, 0)
        kept = self.kept(ClientPart(split.fixed, split.blocks, split.after, opened.starts_with))
        if planned.regenerate:
            turn = self.app.turns.reopen_turn(tenant_id, chosen.story_id, opened.reply_id, opened.user_id, model, kept)
            return Written(opened, turn.position)
        assert planned.parent_id is not None
        if len(planned.said) == 1 and planned.said[0][0] == "user":  # the same words written meanwhile (a retry)?
            same = self.finder.child(self.app.node(planned.parent_id), ChatMessage("user", planned.said[0][1]))
            if same is not None:  # then a reply beside the other one there, not a second copy of the words
                turn = self.app.turns.reopen_turn(tenant_id, chosen.story_id, opened.reply_id, same.id, model, kept)
                return Written(replace(opened, user_id=same.id), turn.position)
        turn = self.app.turns.open_relayed_turn(
            tenant_id, chosen.story_id, planned.parent_id, planned.said, planned.ids, model, kept
        )
        return Written(opened, turn.position)

    def _existing(self, parent: NodeView, messages: Sequence[ChatMessage]) -> tuple[NodeView, list[ChatMessage]]:
        """Down from `parent` through the children that already hold the messages (a branch the story has,
        not on its current path: a swipe back, another client's leaf), but the last: where the rest go."""
        rest = list(messages)
        while len(rest) > 1:
            child = self.finder.child(parent, rest[0])
            if child is None:
                break
            parent, rest = child, rest[1:]
        return parent, rest

    def outgoing(
        self,
        tenant_id: str,
        chosen: Chosen | None,
        planned: Planned | None,
        original: Sequence[Mapping[str, Any]],
        split: SplitRequest | None = None,
    ) -> list[dict[str, Any]]:
        """What the upstream gets: the request as it came when nothing is recorded, or for a new story (its
        `split`), with its card's memory where the card has one (`proxy_memory.py`); else the client's fixed prompt, changji's context at the user's words —
        fitted to the tokens the client sent, unless the story's settings say its own window decides —, the
        client's own blocks (those inside its chat right before the user's words, those after it at the
        end), any words the reply starts with (for the upstream to go on from), a round of the front end's
        tools at work on the words, after them, and the words' parts that are not text (an image), with them."""
        if chosen is None and split is not None:  # a new story's first request: with its card's memory
            card_id = self._card_id(tenant_id, split)
            card = self.app.get(Card, card_id, CardNotFoundError) if self.app.exists(Card, card_id) else None
            sent = [dict(m) for m in original]
            if card is None or card.tenant_id != tenant_id:
                return sent
            return with_card_memory(self.views.card_memory, card, sent, self.views.renders.count)
        if chosen is None or planned is None:
            return [dict(m) for m in original]
        split = chosen.split
        context = self._relayed(tenant_id, chosen, planned, original)
        messages: list[dict[str, Any]] = [{"role": m.role, "content": m.content} for m in context.messages]
        fixed = [dict(m) for m in original[: len(split.fixed)]]
        if len(fixed) == len(split.fixed) and all(m.get("role") in ("system", "developer") for m in fixed):
            messages[: len(fixed)] = fixed  # as they came (their names: example_user…, their role)
        words = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=len(messages) - 1)
        if split.attachments and messages[words]["role"] == "user":  # an image with the words: sent with them
            messages[words]["content"] = [{"type": "text", "text": messages[words]["content"]}, *split.attachments]
        if split.tool_round:  # the front end's tools at work on the user's words: right after them, as they came
            messages[words + 1 : words + 1] = [dict(m) for m in split.tool_round]
        return messages

    def recalls(self, tenant_id: str, chosen: Chosen, planned: Planned, original: Sequence[Mapping[str, Any]]) -> bool:
        """Whether the context a request sends upstream recalls (`StoryViews.recalls`)."""
        return self.views.recalls(lambda: self._relayed(tenant_id, chosen, planned, original))

    def _relayed(
        self, tenant_id: str, chosen: Chosen, planned: Planned, original: Sequence[Mapping[str, Any]]
    ) -> Context:
        """changji's context at the request's words, fitted to the tokens the client sent (unless the story's
        settings say its own window decides), with the client's own part."""
        split, opened = chosen.split, planned.opened
        budget = self.views.proxy_budget(
            tenant_id, chosen.story_id, _sent_tokens(self.views.renders.count, original), self.budget_rule
        )
        if budget is not None and split.tool_round:  # the front end's tool round goes as it came: taken first
            budget = max(budget - sum(self.views.renders.count(orjson.dumps(m).decode()) for m in split.tool_round), 0)
        part = ClientPart(split.fixed, split.blocks, split.after, opened.starts_with)
        return self.views.relayed_context(tenant_id, chosen.story_id, opened.user_id, part, budget, planned.nodes)

    def continued(
        self, tenant_id: str, chosen: Chosen, opened: Opened, text: str, call: tuple[str, int, int, float]
    ) -> Written[NodeView]:
        """A continue's words added to the reply it continued, with the call and the request's own part. A
        continue asked for by a nudge (a system message after the reply, as SillyTavern sends) is joined
        with a space, as such a front end joins it; the reply itself at the chat's end goes on as written."""
        assert opened.continues is not None
        split = chosen.split
        part = self.kept(ClientPart(split.fixed, split.blocks, split.after, opened.starts_with))
        before = opened.starts_with
        joint = " " if split.after and before and text and not before[-1].isspace() and not text[0].isspace() else ""
        return self.app.nodes.continue_reply(tenant_id, opened.continues, before + joint + text, call, part)

    def kept(self, part: ClientPart) -> str:
        """The blob of a request's client part: its texts and their manifest, each kept once (a front end
        sends much the same part turn after turn)."""
        name = ""
        for data, media in [*((t.encode(), TEXT_TYPE) for t in part.texts()), (part.manifest(), CLIENT_PART_TYPE)]:
            name = hashlib.sha256(data).hexdigest()  # (as the blob store names it)
            if name not in self._parts:
                self._put_blob(data, media)
                with self._remembering:
                    self._parts[name] = None
                    while len(self._parts) > KEPT_PARTS:
                        del self._parts[next(iter(self._parts))]
        return name  # (the manifest's: the last)

    def _continued(
        self, tenant_id: str, story_id: UUID, split: SplitRequest, digests: ChatDigests, card: Prompt
    ) -> Chosen | None:
        """The decision for a request that repeats the story's path up to its leaf, or up to the leaf's
        user node (a swipe), as a digest this proxy kept says — without the path; None otherwise."""
        story = self.app.story(tenant_id, story_id)
        assert story.leaf_id is not None
        leaf = self.app.node(story.leaf_id)
        chat = split.chat
        if not chat or chat[-1].role != "user":  # (a continue, a prefill, a quiet request: read the whole path)
            return None
        if len(chat) < OTHER_CARD and len(chat) < self.finder.enough(story, card, split):
            return None  # the first words alone: not another card's story
        known = self._known.get(leaf.id)
        if known is not None and known[0] < len(digests) and digests.at(known[0]) == known[1]:
            rest = chat[known[0] :]
            if len(rest) == 1 and rest[0].role == "user" and leaf.kind != "user":
                return Chosen(story.id, (leaf,), split, Append(0, (rest[0],), branch=False), digests)
        if leaf.parent_id is not None:
            user = self._known.get(leaf.parent_id)
            if user is not None and user[0] == len(chat) and digests.at(user[0]) == user[1]:
                return Chosen(story.id, (self.app.node(leaf.parent_id),), split, Regenerate(0), digests)
        return None

    def remember(self, tenant_id: str, chosen: Chosen, opened: Opened | None, reply_text: str) -> None:
        """After a recorded reply: the digests of the chat up to its user node and up to it, as the front
        end will send them next."""
        if opened is None or opened.continues is not None:
            return
        digests = chosen.digests or ChatDigests(chosen.split)
        count = len(chosen.split.chat)
        if chosen.split.chat and chosen.split.chat[-1].role == "assistant":  # a prefill: its words are the reply's
            count -= 1
        user = (count, digests.at(count))
        reply = (count + 1, digests.then(count, ChatMessage("assistant", reply_text)))
        with self._remembering:
            self._known[opened.user_id], self._known[opened.reply_id] = user, reply
            _bound(self._known)

    def _path(self, story: Story) -> tuple[NodeView, ...]:
        assert story.leaf_id is not None
        return tuple(self.views.path(story.tenant_id, story.id, story.leaf_id, None))

    def story_hint(self, tenant_id: str, user_field: Any) -> UUID | None:
        """The story a request's `user` field names, when it is one of the tenant's (the header, which
        must be, is read by the handler)."""
        if isinstance(user_field, str):
            try:
                story_id = UUID(user_field)
            except ValueError:
                return None
            try:
                self.app.story(tenant_id, story_id)
            except StoryNotFoundError:
                return None
            return story_id
        return None


def _sent_tokens(count: Callable[[str], int], original: Sequence[Mapping[str, Any]]) -> Callable[[int], int]:
    """What a request's messages count (`count`: a message's tokens, its overhead with them), newest
    first, stopping once past `most` (a front end that sends its whole history sends far more than any
    budget: the count costs the budget, not the history)."""

    def sent(most: int) -> int:
        total = 0
        for message in reversed(original):
            total += count(message_text(message.get("content")))
            if total > most:
                break
        return total

    return sent


def _card_id(tenant_id: str, split: SplitRequest, made: int = 0) -> UUID:
    """The card a request's system messages make (the same text, the same card); `made`: how many cards
    of that text were deleted before it."""
    fixed = "\n\n".join(split.fixed)
    again = f"\n{made}" if made else ""
    return uuid5(PROXY_CARDS, f"{tenant_id}\n{hashlib.sha256(fixed.encode()).hexdigest()}{again}")


def _bound(kept: dict[Any, Any]) -> None:
    while len(kept) > KNOWN:  # the oldest go first
        del kept[next(iter(kept))]
