"""A chat from another system made into a story, in one transaction: the greeting as the root, each
step a node on the path with its alternatives (swipes) as siblings, hidden steps hidden, dates kept (and the
times each text's generation started and finished, where given, in the import's record by node).

Node ids follow from the story id and the step's place (uuid5), so the same import with the same story
id makes the same tree. Side work is not run here: each reply on the path makes its scribe job due as
any reply does (a swipe off the path settles its own as skipped: the scene follows the path), and the
last reply of the path announces the compaction the path is due."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID, uuid5

from domain.aggregates import CommandGroup, Written
from domain.errors import EmptyTextError
from domain.tree.commands.base import TreeAggregates
from domain.tree.commands.compaction import CompactionCommands
from domain.tree.node import Node
from domain.tree.story import Story


@dataclass(frozen=True, slots=True)
class ImportedText:
    text: str
    said_at: datetime | None = None
    generated: tuple[str | None, str | None] = (None, None)  # when its writing started and finished, as given


@dataclass(frozen=True, slots=True)
class ImportedStep:
    """One node of the path, oldest first; `swipes` are all its versions in their order (replies only have
    more than one), `chosen` the index of the one on the path."""

    kind: Literal["user", "reply"]
    swipes: tuple[ImportedText, ...]
    chosen: int = 0
    hidden: bool = False


@dataclass(frozen=True, slots=True)
class ImportedChat:
    title: str
    greeting: str
    greeting_index: int
    steps: Sequence[ImportedStep]
    source: Mapping[str, Any]


class ChatImportCommands(CommandGroup[TreeAggregates]):
    def __init__(self, app: TreeAggregates, compaction: CompactionCommands) -> None:
        super().__init__(app)
        self.compaction = compaction  # (an imported chat announces what its path is due)

    def import_chat(
        self, tenant_id: str, card_id: UUID, story_id: UUID, chat: ImportedChat, settings: Mapping[str, Any]
    ) -> Written[Story]:
        card = self.app.card(tenant_id, card_id)
        card.settings.merged(dict(settings))  # validates the overrides against the card's settings
        index = chat.greeting_index if 0 <= chat.greeting_index < card.data.greeting_count else 0
        root = Node.place_greeting(uuid5(story_id, "root"), story_id, chat.greeting, index)
        story = Story.start(story_id, tenant_id, card_id, chat.title or card.data.name, root.id, dict(settings))
        nodes, parent, last_reply = [root], root, None
        generated: dict[str, list[str | None]] = {}  # node id → the times its text was generated, where known
        for depth, step in enumerate(chat.steps, start=1):
            if not step.swipes or not 0 <= step.chosen < len(step.swipes):
                raise EmptyTextError(f"step {depth} has no text to place", field="body")
            siblings = [
                Node.attach(uuid5(story_id, f"{depth}.{i}"), step.kind, parent, swipe.text, swipe.said_at)
                for i, swipe in enumerate(step.swipes)
            ]
            generated |= {
                str(n.id): list(s.generated) for n, s in zip(siblings, step.swipes, strict=True) if any(s.generated)
            }
            if step.hidden:
                siblings[step.chosen].hide()
            for i, sibling in enumerate(siblings):
                if i != step.chosen and sibling.kind == "reply":  # a swipe off the path: no scene to keep
                    sibling.skip_job("scribe", "an imported swipe, off the path")
            nodes += siblings
            parent = siblings[step.chosen]
            last_reply = parent if parent.kind == "reply" else last_reply
        story.record_import({**chat.source, "generated": generated} if generated else dict(chat.source), len(nodes))
        story.move_leaf(parent.id, cause="import")
        if last_reply is not None:
            self.compaction.announce_imported(last_reply, self.app.settings(story))
        return Written(story, self.app.commit(story, *nodes))
