"""The eventsourcing Application: load → decide → save. The only module that touches the event store.

Every command runs on one thread at a time (the API gives it a single worker thread); aggregates are
cached without deep copies, so a command that fails evicts what it touched.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.domain import Aggregate, DomainEventProtocol
from eventsourcing.persistence import JSONTranscoder, RecordConflictError, Recording, Transcoding
from pydantic import ValidationError

from domain import events as ev
from domain.card import Card
from domain.compacting import CompactionCommands
from domain.errors import (
    CardInvalidError,
    CardNotFoundError,
    GreetingIndexError,
    NodeNotFoundError,
    NotFoundError,
    StoryNotFoundError,
    VersionConflictError,
)
from domain.node import Node
from domain.ports import TreeIndex
from domain.saves import plan_save
from domain.scening import SceneCommands
from domain.story import Story
from domain.turning import TurnCommands
from domain.values import CardData, NodeKind, NodeView, SavePoint, StorySettings

A = TypeVar("A", bound=Aggregate)
RERENDERING = (ev.NodeHidden, ev.NodeUnhidden, ev.ReplyRevised, ev.EpisodeSummarized, ev.DigestFolded, ev.SummaryEdited)
FINISHED_REPLY = (ev.ReplySealed, ev.ReplyPosted)

DEFAULT_ENV = {
    "AGGREGATE_CACHE_MAXSIZE": "200000",
    "DEEPCOPY_FROM_AGGREGATE_CACHE": "n",
    "AGGREGATE_CACHE_FASTFORWARD": "n",
}


class _SavePointAsDict(Transcoding):
    type = SavePoint
    name = "changji_save_point"

    def encode(self, obj: SavePoint) -> dict[str, Any]:
        return {f: getattr(obj, f) for f in SavePoint.__slots__}

    def decode(self, data: dict[str, Any]) -> SavePoint:
        return SavePoint(**data)


class Changji(TurnCommands, SceneCommands, CompactionCommands, Application[UUID]):
    """Stories, their nodes and cards. `name` pins PostgreSQL table names: never change it."""

    name = "changji"
    env: ClassVar[dict[str, str]] = dict(DEFAULT_ENV)
    snapshotting_intervals = {Story: 200}  # noqa: RUF012

    view_cache_size = 200_000
    recent_size = 256  # events this process saved last, kept for `recent`

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__(env=env)
        self._views: dict[UUID, NodeView] = {}
        self._epochs: dict[UUID, int] = {}
        self._recent: deque[tuple[int, DomainEventProtocol[UUID]]] = deque(maxlen=self.recent_size)
        # story id → (card id, card version, the story's overrides, the merged settings)
        self._settings: dict[UUID, tuple[UUID, int, dict[str, Any], StorySettings]] = {}

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        super().register_transcodings(transcoder)
        transcoder.register(_SavePointAsDict())

    # --- loading ------------------------------------------------------------------------------

    def _get(self, cls: type[A], aggregate_id: UUID, missing: type[NotFoundError]) -> A:
        try:
            aggregate: Aggregate = self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            raise missing(f"{cls.__name__.lower()} {aggregate_id} not found") from None
        if not isinstance(aggregate, cls):
            raise missing(f"{cls.__name__.lower()} {aggregate_id} not found")
        return aggregate

    def card(self, tenant_id: str, card_id: UUID) -> Card:
        card = self._get(Card, card_id, CardNotFoundError)
        if card.tenant_id != tenant_id or card.deleted:
            raise CardNotFoundError(f"card {card_id} not found")
        return card

    def story(self, tenant_id: str, story_id: UUID) -> Story:
        story = self._get(Story, story_id, StoryNotFoundError)
        if story.tenant_id != tenant_id or story.deleted:
            raise StoryNotFoundError(f"story {story_id} not found")
        return story

    def node(self, node_id: UUID) -> NodeView:
        """A node's current view, without any ownership check (projections walk paths with it).

        Views are immutable and kept in a dict refreshed by every save of the node, so walking a path
        is one dictionary lookup per node once the nodes are warm."""
        view = self._views.get(node_id)
        if view is None:
            view = self._remember(self._get(Node, node_id, NodeNotFoundError).view)
        return view

    def _remember(self, view: NodeView) -> NodeView:
        if len(self._views) >= self.view_cache_size:
            del self._views[next(iter(self._views))]
        self._views[view.id] = view
        return view

    def story_node(self, story: Story, node_id: UUID, field: str = "node_id") -> Node:
        """A node of this story; `field` names the request input it came from, for error messages."""
        try:
            node = self._get(Node, node_id, NodeNotFoundError)
        except NodeNotFoundError:
            raise NodeNotFoundError(f"node {node_id} not found", field=field) from None
        if node.story_id != story.id:
            raise NodeNotFoundError(f"node {node_id} not found in story {story.id}", field=field)
        return node

    def owned_node(self, tenant_id: str, node_id: UUID) -> tuple[Story, Node]:
        node = self._get(Node, node_id, NodeNotFoundError)
        assert node.story_id is not None
        try:
            story = self.story(tenant_id, node.story_id)
        except StoryNotFoundError:
            raise NodeNotFoundError(f"node {node_id} not found") from None
        return story, node

    def settings(self, story: Story) -> StorySettings:
        """The card's settings with the story's overrides. Validated once per card version and set of
        overrides (every finished reply asks, to decide on a compaction): the result is immutable."""
        assert story.card_id is not None
        card = self._get(Card, story.card_id, CardNotFoundError)
        cached = self._settings.get(story.id)
        if cached is not None and cached[0] == card.id and cached[1] == card.version and cached[2] == story.settings:
            return cached[3]
        merged = card.settings.merged(story.settings)
        if len(self._settings) >= self.view_cache_size:
            del self._settings[next(iter(self._settings))]
        self._settings[story.id] = (card.id, card.version, dict(story.settings), merged)
        return merged

    def card_of(self, story: Story) -> Card:
        """The story's card, even if the card was deleted after the story began."""
        assert story.card_id is not None
        return self._get(Card, story.card_id, CardNotFoundError)

    def events_of(self, aggregate_id: UUID) -> list[DomainEventProtocol[UUID]]:
        return list(self.repository.event_store.get(aggregate_id))

    # --- saving -------------------------------------------------------------------------------

    @contextmanager
    def _command(self, *aggregates: Aggregate | None) -> Iterator[None]:
        """Evict touched aggregates from the cache if the command fails after loading them."""
        try:
            yield
        except BaseException:
            for aggregate in aggregates:
                if aggregate is not None:
                    self._evict(aggregate.id)
            raise

    def _evict(self, aggregate_id: UUID) -> None:
        if self.repository.cache is not None:
            with suppress(KeyError):
                self.repository.cache.get(aggregate_id, evict=True)

    def _save(self, *aggregates: Aggregate) -> int:
        """Save in one transaction; return the last notification id (for read-your-writes).

        A reply that is finished by this save (posted, or sealed) announces a compaction in the same
        transaction when its path is due for one."""
        for aggregate in aggregates:
            if isinstance(aggregate, Node) and any(isinstance(e, FINISHED_REPLY) for e in aggregate.pending_events):
                assert aggregate.story_id is not None
                story = self._get(Story, aggregate.story_id, StoryNotFoundError)
                self._announce_compaction(aggregate, self.settings(story))
            if isinstance(aggregate, Node) and any(isinstance(e, RERENDERING) for e in aggregate.pending_events):
                assert aggregate.story_id is not None
                self._epochs[aggregate.story_id] = self._epochs.get(aggregate.story_id, 0) + 1
        try:
            recordings = self._record_aggregates(aggregates)
        except RecordConflictError:
            for aggregate in aggregates:
                self._evict(aggregate.id)
            raise VersionConflictError("another write changed this first; reload and retry") from None
        for aggregate in aggregates:
            if isinstance(aggregate, Node):
                self._remember(aggregate.view)
        return max((r.notification.id for r in recordings), default=0)

    def _record_aggregates(self, aggregates: Sequence[Aggregate]) -> list[Recording[UUID]]:
        """What `Application.save` does for aggregates, without asking of each whether it is an event or
        collects events (isinstance against runtime Protocols costs ~20 µs per aggregate on 3.11)."""
        processing = ProcessingEvent[UUID]()
        for aggregate in aggregates:
            processing.events.extend(aggregate.collect_events())
            processing.aggregates[aggregate.id] = aggregate
        recordings = self._record(processing)
        self._take_snapshots(processing)
        self._notify(recordings)
        self.notify(processing.events)
        return recordings

    def _notify(self, recordings: list[Recording[UUID]]) -> None:
        self._recent.extend((r.notification.id, r.domain_event) for r in recordings)

    def recent(self, after: int, until: int) -> list[tuple[int, DomainEventProtocol[UUID]]] | None:
        """The events with notification ids after..until, as this process saved them, if it saved
        every one of them (else None: read them back from the store). Lets the read models fold what
        was just saved without reading and decoding it again."""
        saved = list(self._recent)  # one C-level copy: safe while the writer thread appends
        start = next((i for i in range(len(saved) - 1, -1, -1) if saved[i][0] <= after), -1) + 1
        batch = [item for item in saved[start:] if item[0] <= until]
        if not batch or batch[0][0] != after + 1 or batch[-1][0] != until or len(batch) != until - after:
            return None
        return batch

    def render_epoch(self, story_id: UUID) -> int:
        """Bumped whenever a node of the story renders differently (hidden, unhidden, revised), so
        contexts cached by projections know to start over."""
        return self._epochs.get(story_id, 0)

    @staticmethod
    def _expect(aggregate: Aggregate, expected_version: int | None) -> None:
        if expected_version is not None and expected_version != aggregate.version:
            raise VersionConflictError(
                f"expected version {expected_version}, current version is {aggregate.version}",
                field="If-Match",
            )

    # --- cards --------------------------------------------------------------------------------

    def create_card(self, card_id: UUID, tenant_id: str, data: CardData, settings: StorySettings) -> int:
        return self._save(Card.create(card_id, tenant_id, data, settings))

    def update_card(
        self,
        tenant_id: str,
        card_id: UUID,
        data: CardData,
        settings: StorySettings,
        expected_version: int | None = None,
    ) -> int:
        card = self.card(tenant_id, card_id)
        self._expect(card, expected_version)
        with self._command(card):
            card.update(data, settings)
            return self._save(card)

    def revise_card(
        self,
        tenant_id: str,
        card_id: UUID,
        changes: Mapping[str, Any],
        setting_changes: Mapping[str, Any],
        expected_version: int | None = None,
    ) -> int:
        """Merge field and setting changes into the card as it is now (so concurrent edits of different
        fields all survive), then save the result."""
        card = self.card(tenant_id, card_id)
        self._expect(card, expected_version)
        try:
            data = CardData.model_validate({**card.data.model_dump(), **changes})
            settings = card.settings.merged(dict(setting_changes))
        except ValidationError as invalid:
            first = invalid.errors()[0]
            raise CardInvalidError(first["msg"], field=".".join(str(p) for p in first["loc"])) from None
        with self._command(card):
            card.update(data, settings)
            return self._save(card)

    def delete_card(self, tenant_id: str, card_id: UUID) -> int:
        card = self.card(tenant_id, card_id)
        with self._command(card):
            card.delete()
            return self._save(card)

    # --- stories ------------------------------------------------------------------------------

    def start_story(
        self,
        story_id: UUID,
        root_id: UUID,
        tenant_id: str,
        card_id: UUID,
        greeting_index: int,
        title: str,
        settings: Mapping[str, Any],
    ) -> int:
        card = self.card(tenant_id, card_id)
        if not 0 <= greeting_index < card.data.greeting_count:
            raise GreetingIndexError(
                f"the card has {card.data.greeting_count} greeting(s); index {greeting_index} is out of range"
            )
        card.settings.merged(dict(settings))  # validates the overrides against the card's settings
        root = Node.place_greeting(root_id, story_id, card.data.greeting(greeting_index), greeting_index)
        story = Story.start(story_id, tenant_id, card_id, title or card.data.name, root_id, dict(settings))
        return self._save(story, root)

    def configure_story(self, tenant_id: str, story_id: UUID, settings: Mapping[str, Any], title: str | None) -> int:
        story = self.story(tenant_id, story_id)
        self.settings(story).merged(dict(settings))
        with self._command(story):
            story.configure({**story.settings, **settings})
            if title is not None:
                story.retitle(title)
            return self._save(story)

    def delete_story(self, tenant_id: str, story_id: UUID) -> int:
        story = self.story(tenant_id, story_id)
        with self._command(story):
            story.delete()
            return self._save(story)

    def append_node(
        self,
        tenant_id: str,
        story_id: UUID,
        node_id: UUID,
        kind: NodeKind,
        text: str,
        parent_id: UUID | None = None,
        expected_version: int | None = None,
    ) -> tuple[NodeView, int]:
        """Attach a node (under `parent_id`, default the leaf) and move the leaf to it, atomically."""
        story = self.story(tenant_id, story_id)
        self._expect(story, expected_version)
        assert story.leaf_id is not None
        parent = self.story_node(story, parent_id or story.leaf_id, "parent_id")
        with self._command(story):
            node = Node.attach(node_id, kind, parent, text)
            story.move_leaf(node.id, cause="append")
            return node.view, self._save(story, node)

    def move_leaf(self, tenant_id: str, story_id: UUID, node_id: UUID, expected_version: int | None = None) -> int:
        story = self.story(tenant_id, story_id)
        self._expect(story, expected_version)
        self.story_node(story, node_id)
        with self._command(story):
            story.move_leaf(node_id, cause="checkout")
            return self._save(story)

    def annotate(self, tenant_id: str, node_id: UUID, action: str, *args: str) -> tuple[NodeView, int]:
        """star / unstar / hide / unhide / revise(text, reason) on one node."""
        _, node = self.owned_node(tenant_id, node_id)
        with self._command(node):
            getattr(node, action)(*args)
            return node.view, self._save(node)

    def annotate_many(self, tenant_id: str, story_id: UUID, node_ids: Sequence[UUID], action: str) -> int:
        """The same annotation on several nodes of one story, in one transaction."""
        story = self.story(tenant_id, story_id)
        nodes = [self.story_node(story, node_id, "node_ids") for node_id in node_ids]
        with self._command(*nodes):
            for node in nodes:
                getattr(node, action)()
            return self._save(*nodes)

    # --- saves and world lines ----------------------------------------------------------------

    def mark_save(
        self, tenant_id: str, story_id: UUID, save_id: str, name: str, node_id: UUID | None, tree: TreeIndex
    ) -> tuple[SavePoint, int]:
        story = self.story(tenant_id, story_id)
        assert story.leaf_id is not None
        target = self.story_node(story, node_id or story.leaf_id).id
        saves = sorted(story.saves.values(), key=lambda s: s.created_at)
        shallowest = min((self.node(s.node_id).depth for s in saves), default=0)
        path = tree.path_ids(target, shallowest)  # one walk, however many saves there are
        plan = plan_save(
            saves,
            on_path=lambda n: n in path,
            descends_from=lambda n, a: tree.is_ancestor(a, n),
            new_line_id=save_id,
        )
        with self._command(story):
            story.mark_save(save_id, name, target, plan)
            return story.saves[save_id], self._save(story)

    def delete_save(self, tenant_id: str, story_id: UUID, save_id: str) -> int:
        story = self.story(tenant_id, story_id)
        with self._command(story):
            story.delete_save(save_id)
            return self._save(story)

    def rename_worldline(self, tenant_id: str, story_id: UUID, worldline_id: str, name: str) -> int:
        story = self.story(tenant_id, story_id)
        with self._command(story):
            story.rename_worldline(worldline_id, name)
            return self._save(story)

    def restore_save(self, tenant_id: str, story_id: UUID, save_id: str) -> int:
        story = self.story(tenant_id, story_id)
        save = story.save_point(save_id)
        with self._command(story):
            story.move_leaf(save.node_id, cause="restore")
            return self._save(story)
