"""Stories: start one at a card's greeting, configure, move to another card, delete; append a node and
move the leaf."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from domain.aggregates import CommandGroup, Written, expect_version
from domain.card.card import Card
from domain.errors import CardMergeError, CardNotFoundError, GreetingIndexError, StoryNotFoundError
from domain.memory.card_memory import CardMemory, memory_id
from domain.memory.commands import CardMemoryNotFoundError
from domain.memory.recaps import offline_recap
from domain.tree.commands.base import TreeAggregates
from domain.tree.node import Node
from domain.tree.recap_source import path_for_recap
from domain.tree.story import Story, StoryStateError
from domain.values import NodeKind, NodeView


@dataclass(frozen=True, slots=True)
class Appended:
    """A node appended at the end of a story's path: the node, the story's new version, the position."""

    node: NodeView
    story_version: int
    position: int


class StoryCommands(CommandGroup[TreeAggregates]):
    def start_story(
        self,
        story_id: UUID,
        root_id: UUID,
        tenant_id: str,
        card_id: UUID,
        greeting_index: int,
        title: str,
        settings: Mapping[str, Any],
        carry_from: UUID | None = None,
    ) -> int:
        """`carry_from`: an earlier story whose recap the new one opens with (`Story.carry`)."""
        card = self.app.card(tenant_id, card_id)
        if not 0 <= greeting_index < card.data.greeting_count:
            raise GreetingIndexError(
                f"the card has {card.data.greeting_count} greeting(s); index {greeting_index} is out of range"
            )
        card.settings.merged(dict(settings))  # validates the overrides against the card's settings
        carried = self._carried(tenant_id, carry_from) if carry_from is not None else None
        root = Node.place_greeting(root_id, story_id, card.data.greeting(greeting_index), greeting_index)
        story = Story.start(story_id, tenant_id, card_id, title or card.data.name, root_id, dict(settings))
        if carry_from is not None and carried is not None:
            story.carry(carry_from, *carried)
        return self.app.commit(story, root)

    def _carried(self, tenant_id: str, story_id: UUID) -> tuple[UUID, str]:
        """What an earlier story of the tenant leaves a new one (the node its path was read to, and its
        recap): the card memory's recap when it read that story's current path, else the offline rules'."""
        earlier = self.app.get(Story, story_id, StoryNotFoundError)
        if earlier.tenant_id != tenant_id or earlier.deleted:
            raise StoryNotFoundError(f"story {story_id} not found", field="carry_from")
        card = self.app.card_of(earlier)
        char, settings = card.data.name, self.app.settings(earlier)
        source = path_for_recap(earlier, self.app.node, char, settings.user_name)
        if source is None or source.last_node_id is None:
            raise StoryStateError(f"story {story_id} has nothing to carry over yet", field="carry_from")
        try:
            memory: CardMemory | None = self.app.get(CardMemory, memory_id(card.id), CardMemoryNotFoundError)
        except CardMemoryNotFoundError:
            memory = None
        recap = memory.recaps.get(story_id) if memory is not None else None
        if recap is not None and memory is not None and memory.recapped(story_id, source.fingerprint):
            return source.last_node_id, recap.text
        language = self.app.language(earlier)
        return source.last_node_id, offline_recap(
            earlier.title or char, source.digest, source.episodes, language, source.recent
        )

    def configure_story(self, tenant_id: str, story_id: UUID, settings: Mapping[str, Any], title: str | None) -> int:
        story = self.app.story(tenant_id, story_id)
        self.app.settings(story).merged(dict(settings))
        with self.app.evicting(story):
            story.configure({**story.settings, **settings})
            if title is not None:
                story.retitle(title)
            return self.app.commit(story)

    def move_stories(self, tenant_id: str, story_ids: Sequence[UUID], from_card: UUID, into: UUID) -> Written[int]:
        """Move the listed stories of `from_card` (deleted ones too: a restore finds them moved) to `into`,
        the card `from_card`'s merges lead to now, in one transaction; how many moved. A story that is on
        another card by now stays where it is. A story that took the user's name from the card it leaves
        keeps that name (as its own setting) where the card it goes to has another."""
        card = self.app.get(Card, from_card, CardNotFoundError)
        end = self.app.merged_end(card)
        if card.tenant_id != tenant_id or card.merged_into is None or end is None or end.id != into:
            raise CardMergeError(f"card {from_card} is not merged into card {into}", field="into")
        moving = []
        for story_id in story_ids:
            story = self.app.get(Story, story_id, StoryNotFoundError)
            if story.tenant_id == tenant_id and story.card_id == from_card:
                moving.append(story)
        if not moving:
            return Written(0, 0)
        with self.app.evicting(*moving):
            for story in moving:
                user = self.app.settings(story).user_name
                story.move_to_card(into)
                if "user_name" not in story.settings and end.settings.user_name != user:
                    story.configure({**story.settings, "user_name": user})
            return Written(len(moving), self.app.commit(*moving))

    def delete_story(self, tenant_id: str, story_id: UUID, expected_version: int | None = None) -> int:
        """Delete a story: it leaves every listing and read; its events stay, and `restore_story` brings
        it back."""
        story = self.app.story(tenant_id, story_id)
        expect_version(story, expected_version)
        with self.app.evicting(story):
            story.delete()
            return self.app.commit(story)

    def restore_story(self, tenant_id: str, story_id: UUID, expected_version: int | None = None) -> Written[Story]:
        """Bring a deleted story back as it was (a story that is not deleted stays as it is)."""
        story = self.app.get(Story, story_id, StoryNotFoundError)
        if story.tenant_id != tenant_id:
            raise StoryNotFoundError(f"story {story_id} not found")
        expect_version(story, expected_version)
        with self.app.evicting(story):
            story.restore()
            return Written(story, self.app.commit(story))

    def append_node(
        self,
        tenant_id: str,
        story_id: UUID,
        node_id: UUID,
        kind: NodeKind,
        text: str,
        parent_id: UUID | None = None,
        expected_version: int | None = None,
    ) -> Appended:
        """Attach a node (under `parent_id`, default the leaf) and move the leaf to it, atomically."""
        story = self.app.story(tenant_id, story_id)
        expect_version(story, expected_version)
        parent = self.app.leaf_or(story, parent_id, "parent_id")
        with self.app.evicting(story):
            node = Node.attach(node_id, kind, parent, text)
            story.move_leaf(node.id, cause="append")
            position = self.app.commit(story, node)
            return Appended(node.view, story.version, position)

    def move_leaf(
        self, tenant_id: str, story_id: UUID, node_id: UUID, expected_version: int | None = None
    ) -> Written[tuple[UUID, int]]:
        """Check out a node: the story's leaf moves there. The value is (leaf, story version) as this
        command left them, which a concurrent checkout may change before anyone reads them again."""
        story = self.app.story(tenant_id, story_id)
        expect_version(story, expected_version)
        self.app.story_node(story, node_id)
        with self.app.evicting(story):
            story.move_leaf(node_id, cause="checkout")
            position = self.app.commit(story)
            return Written((node_id, story.version), position)
