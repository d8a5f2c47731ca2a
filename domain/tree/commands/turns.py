"""Engine turns on the write side: open a turn, play each model round, answer, stop.

Every command is one load → decide → save; a round's model call, draft operations and any seal go
out together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.aggregates import CommandGroup, Written, expect_version
from domain.card.card import Card
from domain.card.commands.lore import LoreCommands, asks_to_record
from domain.card.lorebook import Lorebook, WrittenAt
from domain.errors import DomainError, NodeKindError, NodeNotFoundError, StoryNotFoundError, TurnStateError
from domain.language import Language
from domain.ports import ChatResult, ToolCall
from domain.tree.commands.base import TreeAggregates
from domain.tree.draft_tools import (
    Ending,
    LoreFound,
    ToolOutcome,
    lore_write_request,
    lore_written,
    refused,
    run_tool,
)
from domain.tree.node import Node
from domain.tree.rules.paths import walk_up
from domain.tree.story import Story
from domain.tree.turn_events import TurnAsked
from domain.values import NodeKind, NodeView, Recollection, StopReason


class Ask(NamedTuple):
    """The decision card a round put to the user."""

    ask_id: str
    question: str
    options: list[str]


@dataclass(frozen=True, slots=True)
class Round:
    """What a round did: the tool results to send back, and how the turn ended (if it did): sealed,
    asked (`ask` holds the question), revised, or stopped for a reason."""

    outcomes: tuple[ToolOutcome, ...]
    ends: Ending | StopReason | None
    reply: NodeView
    position: int
    ask: Ask | None = None


@dataclass(frozen=True, slots=True)
class OpenedTurn:
    """The user's node and the empty reply under it, with the position of the opening's last event."""

    user: NodeView
    reply: NodeView
    position: int


@dataclass(frozen=True, slots=True)
class Answered:
    """The decision card that was answered, and the reply as it stands to resume from."""

    ask: TurnAsked
    reply: NodeView
    position: int


class TurnCommands(CommandGroup[TreeAggregates]):
    def __init__(self, app: TreeAggregates, lore: LoreCommands) -> None:
        super().__init__(app)
        self.lore = lore  # (the model's `lorebook_write` goes to the card's supplement)

    def open_turn(
        self,
        tenant_id: str,
        story_id: UUID,
        user_id: UUID,
        reply_id: UUID,
        text: str,
        parent_id: UUID | None,
        model: str,
        expected_version: int | None = None,
    ) -> OpenedTurn:
        """The user's words and an empty reply under them, with the leaf on the reply: one transaction."""
        story = self.app.story(tenant_id, story_id)
        expect_version(story, expected_version)
        parent = self.app.leaf_or(story, parent_id, "parent_id")
        with self.app.evicting(story):
            user = Node.attach(user_id, "user", parent, text)
            reply = Node.open_reply(reply_id, user, model)
            story.move_leaf(reply.id, cause="turn")
            noted = [user] if user.pending_events else []
            return OpenedTurn(user.view, reply.view, self.app.commit(story, *noted, reply))

    def open_relayed_turn(
        self,
        tenant_id: str,
        story_id: UUID,
        parent_id: UUID,
        said: Sequence[tuple[NodeKind, str]],
        ids: Sequence[UUID],
        model: str,
        client_part: str,
    ) -> OpenedTurn:
        """A turn a front end's request opens (the chat-completions proxy), in one transaction: the messages
        the story does not have yet under `parent_id` (`said`, oldest first, one kind after the other; `ids`:
        one for each, and one for the reply), then an empty reply — under the last of them when it is the
        user's words, or in its place when it is the assistant's (a prefill: the reply, once written, is
        those words and what the upstream goes on with). `client_part`: the blob of the request's own part
        of what the upstream gets, noted on the reply."""
        story = self.app.story(tenant_id, story_id)
        with self.app.evicting(story):
            nodes = self._relayed_nodes(story, parent_id, said, ids)
            user = nodes[-1] if nodes else self.app.story_node(story, parent_id)  # (the user's words, or a prefill's)
            reply = Node.open_reply(ids[len(said)], user, model)
            reply.note_client_part(client_part)
            story.move_leaf(reply.id, cause="turn")
            return OpenedTurn(user.view, reply.view, self.app.commit(story, *nodes, reply))

    def plan_relayed_turn(
        self, tenant_id: str, story_id: UUID, parent_id: UUID, said: Sequence[tuple[NodeKind, str]], ids: Sequence[UUID]
    ) -> tuple[NodeView, ...]:
        """The nodes `open_relayed_turn` would add for the messages (the reply aside), as views, checked as
        it checks them, and nothing saved: a proxied request's context is assembled on them before the
        upstream answers, and they are written only once it has."""
        story = self.app.story(tenant_id, story_id)
        return tuple(node.view for node in self._relayed_nodes(story, parent_id, said, ids))

    def _relayed_nodes(
        self, story: Story, parent_id: UUID, said: Sequence[tuple[NodeKind, str]], ids: Sequence[UUID]
    ) -> list[Node]:
        """The messages under `parent_id` as new nodes, oldest first (a prefill, the last, is the reply's
        and makes none)."""
        parent = self.app.story_node(story, parent_id)
        nodes: list[Node] = []
        for (kind, text), node_id in zip(said if said[-1][0] == "user" else said[:-1], ids, strict=False):
            parent = Node.attach(node_id, kind, parent, text)
            nodes.append(parent)
        return nodes

    def reopen_turn(
        self,
        tenant_id: str,
        story_id: UUID,
        reply_id: UUID,
        user_id: UUID | None,
        model: str,
        client_part: str | None = None,
    ) -> OpenedTurn:
        """Regenerate: a new empty reply beside the others under a user node (default: the leaf's).
        `client_part`: for a proxied front end's request, the blob of its own part of what the upstream
        gets, noted on the reply."""
        story = self.app.story(tenant_id, story_id)
        user = self.app.leaf_or(story, user_id, "user_id")
        if user.kind == "reply" and user_id is None and user.parent_id is not None:
            user = self.app.story_node(story, user.parent_id)
        if user.kind != "user":
            raise NodeKindError("regenerate answers a user node", field="user_id")
        with self.app.evicting(story):
            reply = Node.open_reply(reply_id, user, model)
            if client_part is not None:
                reply.note_client_part(client_part)
            story.move_leaf(reply.id, cause="regenerate")
            return OpenedTurn(user.view, reply.view, self.app.commit(story, reply))

    def turn_reply(self, tenant_id: str, reply_id: UUID) -> Node:
        _, node = self.app.owned_node(tenant_id, reply_id)
        if node.kind != "reply" or node.phase == "final":
            raise NodeKindError("that node is not a reply written by the engine", field="node_id")
        return node

    def _previous_reply(self, reply: Node) -> Node | None:
        """The reply (or greeting) the user answered in this turn: the one previous_draft_* may revise."""
        assert reply.parent_id is not None
        user = self.app.get(Node, reply.parent_id, NodeNotFoundError)
        previous = self.app.get(Node, user.parent_id, NodeNotFoundError) if user.parent_id else None
        return previous if previous is not None and previous.phase in ("final", "sealed") else None

    def play_round(
        self,
        reply_id: UUID,
        result: ChatResult,
        latency_ms: float,
        tools_allowed: bool,
        memory: Mapping[str, Sequence[Recollection] | None] | None = None,
        lore: Mapping[str, Sequence[LoreFound] | None] | None = None,
    ) -> Round:
        """Record one model round and run its tool calls (or capture its text); saved as one transaction.
        `memory`, `lore`: what the engine found for the round's `memory_search` and `lorebook_search`
        calls, by call id. A `lorebook_write` is saved with the reply, in the card's supplement."""
        reply = self.app.get(Node, reply_id, NodeNotFoundError)
        if reply.phase != "writing":
            raise TurnStateError(f"the turn is {reply.phase}")
        previous = self._previous_reply(reply)
        assert reply.story_id is not None
        story = self.app.get(Story, reply.story_id, StoryNotFoundError)
        language = self.app.language(story)
        writes_lore = any(call.name == "lorebook_write" for call in result.tool_calls) and tools_allowed
        card = self.app.card_of(story) if writes_lore else None
        books = self.lore.lorebooks(card) if card is not None else []
        lore_saves: list[Aggregate] = []
        with self.app.evicting(reply, previous, card, *books):
            reply.record_call(
                "turn", result.model, result.prompt_tokens or 0, result.completion_tokens or 0, latency_ms, "ok"
            )
            outcomes: list[ToolOutcome] = []
            ends: Ending | StopReason | None = None
            if not result.tool_calls:
                ends = self._finish_without_tools(reply, result.text)
            elif not tools_allowed:
                _capture(reply, result.text)
                reply.stop("runaway", "the model kept calling tools after the round limit")
                ends = "stopped"
            else:
                if result.text and any(call.name == "ask" for call in result.tool_calls):
                    _capture(reply, result.text)
                for call in result.tool_calls:
                    if call.name == "lorebook_write" and card is not None:
                        outcome = self._write_lore(reply, story, card, call, language, lore_saves)
                    else:
                        outcome = run_tool(reply, previous, call, memory, language, lore)
                    outcomes.append(outcome)
                    if outcome.ends:
                        ends = outcome.ends
                        break
            if ends == "revised" and previous is not None:  # the leaf goes back to the revised reply
                with self.app.evicting(story):
                    story.move_leaf(previous.id, cause="revision")
                    position = self.app.commit(reply, previous, story, *lore_saves)
            else:
                position = self.app.commit(reply, *lore_saves)
            ask = Ask(reply.ask.ask_id, reply.ask.question, list(reply.ask.options)) if reply.ask else None
            return Round(tuple(outcomes), ends, reply.view, position, ask)

    def _write_lore(
        self, reply: Node, story: Story, card: Card, call: ToolCall, language: Language, saves: list[Aggregate]
    ) -> ToolOutcome:
        """The model's `lorebook_write`: into the card's supplement, linked to this reply; held for the
        user's approval when the card's gate is on and the user's words did not ask to record."""
        try:
            fields = lore_write_request(call)
            settings = self.app.settings(story)
            assert reply.parent_id is not None
            gated = settings.lore_write_gate and not asks_to_record(self.app.node(reply.parent_id).text)
            unsaved = next((a for a in saves if isinstance(a, Lorebook)), None)
            book, written = self.lore.write_lore(
                card, WrittenAt(story.id, reply.id), fields, gated, self._holds, unsaved
            )
        except DomainError as refusal:
            reply.refuse(call.name, str(refusal))
            return ToolOutcome(call.id, call.name, refused(refusal.told(language), language), ok=False)
        for aggregate in (book, card):
            if aggregate is not None and aggregate.pending_events and aggregate not in saves:
                saves.append(aggregate)
        content = lore_written(written.entry.label, written.new, written.pending, language)
        return ToolOutcome(call.id, call.name, content, ok=True)

    def _holds(self, where: WrittenAt | None, at: WrittenAt) -> bool:
        """Whether a lore entry written at `where` holds where `at` writes: the user's (written nowhere)
        always; the model's in this story where the reply that wrote it is on the path, in another story
        while it is on that story's current path (as `service/lore.py` shows them to contexts)."""
        if where is None:
            return True
        if where.story_id == at.story_id:
            return self._above(where.node_id, at.node_id)
        story = self.app.get(Story, where.story_id, StoryNotFoundError)
        return not story.deleted and story.leaf_id is not None and self._above(where.node_id, story.leaf_id)

    def _above(self, node_id: UUID, below: UUID) -> bool:
        """Whether `node_id` is `below` or one of its ancestors (walked up as far as its depth)."""
        depth = self.app.node(node_id).depth
        for node in walk_up(self.app.node, below):
            if node.depth <= depth:
                return node.id == node_id
        return False

    @staticmethod
    def _finish_without_tools(reply: Node, text: str) -> Ending | StopReason:
        """A round without tool calls ends the turn: its text joins the draft, which is sealed."""
        _capture(reply, text)
        if reply.text.strip():
            reply.seal(reply.draft_version)
            return "sealed"
        reply.stop("empty", "the model returned neither text nor tool calls")
        return "stopped"

    def fail_turn(
        self, reply_id: UUID, reason: StopReason, detail: str, preview: str, call: tuple[str, float] | None = None
    ) -> Written[NodeView]:
        """End a turn that broke (model error, stop, disconnect): keep streamed text as an unsealed draft.
        `call`: the model call that was cut short, as (outcome, milliseconds), for the ledger."""
        reply = self.app.get(Node, reply_id, NodeNotFoundError)
        with self.app.evicting(reply):
            if call is not None:
                reply.record_call("turn", reply.model, 0, 0, call[1], call[0])
            if reply.phase == "writing":
                _capture(reply, preview)
            reply.stop(reason, detail)
            return Written(reply.view, self.app.commit(reply))

    def set_aside_for_tools(self, reply_id: UUID, detail: str, call: tuple[str, int, int, float]) -> Written[NodeView]:
        """A proxied reply the upstream answered by calling the front end's own tools: the call in its
        ledger — (model, prompt tokens, completion tokens, milliseconds) — and the reply stopped empty
        (`tool_calls`; any words with the calls are the front end's, sent back with the round): the
        request that brings the tools' results writes the turn's reply beside it."""
        reply = self.app.get(Node, reply_id, NodeNotFoundError)
        model, prompt_tokens, completion_tokens, latency_ms = call
        with self.app.evicting(reply):
            reply.record_call("turn", model, prompt_tokens, completion_tokens, latency_ms, "tool_calls")
            reply.stop("tool_calls", detail)
            return Written(reply.view, self.app.commit(reply))

    def answer_ask(self, tenant_id: str, reply_id: UUID, answer: str) -> Answered:
        reply = self.turn_reply(tenant_id, reply_id)
        with self.app.evicting(reply):
            ask = reply.answer(answer)
            return Answered(ask, reply.view, self.app.commit(reply))


def _capture(reply: Node, text: str) -> None:
    """Streamed text outside the tools goes into the draft: written when empty, appended otherwise."""
    if not text.strip() or reply.phase != "writing":
        return
    if reply.draft_version == 0 and not reply.text:
        reply.write_draft(0, text, direct=True)
    else:
        reply.append_draft(reply.draft_version, text, direct=True)
