"""The Node aggregate: one greeting, user or reply node of a story tree, with its annotations."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain import events as ev
from domain.errors import EmptyTextError, InvalidParentError, NodeKindError
from domain.values import NodeKind, NodeView

ALLOWED_PARENTS: dict[NodeKind, tuple[NodeKind, ...]] = {
    "user": ("greeting", "reply"),
    "reply": ("user",),
    "greeting": (),
}


class Node(Aggregate):
    def __init__(self) -> None:
        self.story_id: UUID | None = None
        self.parent_id: UUID | None = None
        self.kind: NodeKind = "greeting"
        self.depth = 0
        self.turn = 0
        self.text = ""
        self.hidden = False
        self.starred = False
        self.revisions = 0
        self._view: NodeView | None = None

    @classmethod
    def place_greeting(cls, node_id: UUID, story_id: UUID, text: str, greeting_index: int) -> Node:
        return cls._create(ev.GreetingPlaced, id=node_id, story_id=story_id, text=text, greeting_index=greeting_index)

    @classmethod
    def attach(cls, node_id: UUID, kind: NodeKind, parent: Node, text: str) -> Node:
        """A new user or reply node under `parent`, refusing turns that do not alternate."""
        if parent.kind not in ALLOWED_PARENTS[kind]:
            raise InvalidParentError(f"a {kind} node cannot follow a {parent.kind} node")
        if not text.strip():
            raise EmptyTextError(f"a {kind} node needs text")
        event_class = ev.UserSpoke if kind == "user" else ev.ReplyPosted
        return cls._create(
            event_class,
            id=node_id,
            story_id=parent.story_id,
            parent_id=parent.id,
            text=text,
            depth=parent.depth + 1,
            turn=parent.turn + (1 if kind == "user" else 0),
        )

    def revise(self, text: str, reason: str) -> None:
        if self.kind == "user":
            raise NodeKindError("user words are edited by a sibling user node, not revised", field="node_id")
        if not text.strip():
            raise EmptyTextError("a revision needs text")
        if text != self.text:
            self.trigger_event(ev.ReplyRevised, text=text, reason=reason)

    def star(self) -> None:
        if not self.starred:
            self.trigger_event(ev.NodeStarred)

    def unstar(self) -> None:
        if self.starred:
            self.trigger_event(ev.NodeUnstarred)

    def hide(self) -> None:
        if not self.hidden:
            self.trigger_event(ev.NodeHidden)

    def unhide(self) -> None:
        if self.hidden:
            self.trigger_event(ev.NodeUnhidden)

    @property
    def view(self) -> NodeView:
        """An immutable copy of the current state, rebuilt only when the version changes."""
        if self._view is None or self._view.version != self.version:
            assert self.story_id is not None
            self._view = NodeView(
                id=self.id,
                story_id=self.story_id,
                parent_id=self.parent_id,
                kind=self.kind,
                depth=self.depth,
                turn=self.turn,
                text=self.text,
                hidden=self.hidden,
                starred=self.starred,
                revisions=self.revisions,
                version=self.version,
                created_at=self.created_on,
            )
        return self._view

    def when(self, event: Any) -> None:
        match event:
            case ev.GreetingPlaced():
                self.story_id, self.kind, self.text = event.story_id, "greeting", event.text
            case ev.UserSpoke() | ev.ReplyPosted():
                self.story_id, self.parent_id, self.text = event.story_id, event.parent_id, event.text
                self.kind = "user" if isinstance(event, ev.UserSpoke) else "reply"
                self.depth, self.turn = event.depth, event.turn
            case ev.ReplyRevised():
                self.text = event.text
                self.revisions += 1
            case ev.NodeStarred() | ev.NodeUnstarred():
                self.starred = isinstance(event, ev.NodeStarred)
            case ev.NodeHidden() | ev.NodeUnhidden():
                self.hidden = isinstance(event, ev.NodeHidden)
