"""The eventsourcing Application: load → decide → save. The only module that touches the event store.

`Changji` loads, caches and saves aggregates; the commands live with their aggregates, one group per
capability (`domain/card/commands/`, `domain/tree/commands/`), each given the application as the
Protocol its room declares (`domain/aggregates.py`), and reached as attributes:
`app.stories.append_node(…)`, `app.turns.play_round(…)`.
Every command runs on one thread at a time (the service gives it a single worker thread); aggregates
are cached without deep copies, so a command that fails evicts what it touched (`evicting`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.domain import Aggregate, DomainEventProtocol
from eventsourcing.persistence import JSONTranscoder, RecordConflictError, Recording, Transcoding
from eventsourcing.utils import TopicError, resolve_topic

import domain.topics  # noqa: F401  (every topic events were ever stored under resolves)
from domain.card import lookups
from domain.card.card import Card
from domain.card.commands.cards import CardCommands
from domain.card.commands.lore import LoreCommands
from domain.errors import (
    CardNotFoundError,
    ConcurrentWriteError,
    NodeNotFoundError,
    NotFoundError,
    StoryNotFoundError,
)
from domain.language import Language
from domain.memory.commands import CardMemoryCommands
from domain.tree.commands.chat_imports import ChatImportCommands
from domain.tree.commands.compaction import CompactionCommands
from domain.tree.commands.jobs import JobCommands
from domain.tree.commands.nodes import NodeCommands
from domain.tree.commands.saves import SaveCommands
from domain.tree.commands.scene import SceneCommands
from domain.tree.commands.stories import StoryCommands
from domain.tree.commands.turns import TurnCommands
from domain.tree.events import NodeHidden, NodeUnhidden, ReplyPosted, ReplyRevised, StoryMovedToCard
from domain.tree.node import Node
from domain.tree.node_views import NodeViews
from domain.tree.story import Story
from domain.tree.turn_events import ReplySealed
from domain.tree.work_events import DigestFolded, EpisodeSummarized, SummaryEdited
from domain.values import NodeView, SavePoint, StorySettings

A = TypeVar("A", bound=Aggregate)
RERENDERING = (NodeHidden, NodeUnhidden, ReplyRevised)
SUMMARIZING = (EpisodeSummarized, DigestFolded, SummaryEdited)
FINISHED_REPLY = (ReplySealed, ReplyPosted)

DEFAULT_ENV = {
    "AGGREGATE_CACHE_MAXSIZE": "200000",
    "DEEPCOPY_FROM_AGGREGATE_CACHE": "n",
    "AGGREGATE_CACHE_FASTFORWARD": "n",
}


class SavePointAsDict(Transcoding):
    """A save point inside an event (`SavePointMarked`), as the JSON object of its fields."""

    type = SavePoint
    name = "changji_save_point"

    def encode(self, obj: SavePoint) -> dict[str, Any]:
        return {f: getattr(obj, f) for f in SavePoint.__slots__}

    def decode(self, data: dict[str, Any]) -> SavePoint:
        return SavePoint(**data)


@dataclass(frozen=True, slots=True)
class _MergedSettings:
    """A story's settings as merged for one card version and one set of overrides."""

    card_id: UUID
    card_version: int
    overrides: dict[str, Any]
    settings: StorySettings


def stored_class(topic: str) -> type | None:
    """The class a stored topic names; None for one this version does not know (a newer one's event)."""
    try:
        cls = resolve_topic(topic)
    except TopicError:
        return None
    return cls if isinstance(cls, type) else None


class Changji(Application[UUID]):
    """Stories, their nodes and cards. `name` pins PostgreSQL table names: never change it."""

    name = "changji"
    env: ClassVar[dict[str, str]] = dict(DEFAULT_ENV)
    snapshotting_intervals = {Story: 200}  # noqa: RUF012

    view_cache_size = 200_000
    recent_size = 256  # events this process saved last, kept for `recent`

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__(env=env)
        self.views = NodeViews(self.node_aggregate, self.view_cache_size)
        self._epochs: dict[UUID, int] = {}
        self._summarized: dict[UUID, list[tuple[UUID, int]]] = {}  # story → (node, depth) of each summary, in order
        self._recent: deque[tuple[int, DomainEventProtocol[UUID]]] = deque(maxlen=self.recent_size)
        self._settings: dict[UUID, _MergedSettings] = {}
        self.commits = 0  # transactions this process committed (a command that saved nothing yet may be run again)
        # held around each commit: where several processes write the store, one at a time (the service
        # sets a lock across them: `storage/write_lock.py`); reentrant, so a command may hold it throughout
        self.write_lock: AbstractContextManager[Any] = nullcontext()
        # the events of many aggregates in one read of the store, each one's in version order (set by
        # the service where the store can: `storage/notifications.py`); None: `preload` loads one by one
        self.bulk_events: Callable[[Sequence[UUID]], Sequence[Any]] | None = None
        self.cards = CardCommands(self)
        self.lore = LoreCommands(self)
        self.memory = CardMemoryCommands(self)
        self.stories = StoryCommands(self)
        self.nodes = NodeCommands(self)
        self.saves = SaveCommands(self)
        self.jobs = JobCommands(self)
        self.compaction = CompactionCommands(self)
        self.turns = TurnCommands(self, self.lore)
        self.scenes = SceneCommands(self, self.jobs)
        self.imports = ChatImportCommands(self, self.compaction)

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        super().register_transcodings(transcoder)
        transcoder.register(SavePointAsDict())

    # --- loading ------------------------------------------------------------------------------

    def get(self, cls: type[A], aggregate_id: UUID, missing: type[NotFoundError]) -> A:
        """The aggregate of that class, or `missing` (also when the id belongs to another class)."""
        try:
            aggregate: Aggregate = self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            raise missing(f"{cls.__name__.lower()} {aggregate_id} not found") from None
        if not isinstance(aggregate, cls):
            raise missing(f"{cls.__name__.lower()} {aggregate_id} not found")
        return aggregate

    def exists(self, cls: type[Aggregate], aggregate_id: UUID) -> bool:
        """Whether an aggregate of that class was ever saved under this id (deleted ones too)."""
        try:
            return isinstance(self.repository.get(aggregate_id), cls)
        except AggregateNotFoundError:
            return False

    def card(self, tenant_id: str, card_id: UUID) -> Card:
        return lookups.live_card(self, tenant_id, card_id)

    def merged_end(self, card: Card) -> Card | None:
        return lookups.merged_end(self, card)

    def merge_target(self, card_id: UUID) -> UUID:
        return lookups.merge_target(self, card_id)

    def story(self, tenant_id: str, story_id: UUID) -> Story:
        story = self.get(Story, story_id, StoryNotFoundError)
        if story.tenant_id != tenant_id or story.deleted:
            raise StoryNotFoundError(f"story {story_id} not found")
        return story

    def node(self, node_id: UUID) -> NodeView:
        """A node's current view, without any ownership check (projections walk paths with it)."""
        return self.views.get(node_id)

    def held_view(self, node_id: UUID) -> NodeView | None:
        """The node's view if this process holds it (no read of the store)."""
        return self.views.held(node_id)

    def preload(self, node_ids: Sequence[UUID]) -> int:
        """Read the views of those nodes this process does not hold yet, in bulk (`NodeViews.preload`)."""
        return self.views.preload(node_ids, self.bulk_events)

    def node_aggregate(self, node_id: UUID) -> Node:
        """A node's aggregate, without any ownership check (background work records on it)."""
        return self.get(Node, node_id, NodeNotFoundError)

    def story_node(self, story: Story, node_id: UUID, field: str = "node_id") -> Node:
        """A node of this story; `field` names the request input it came from, for error messages."""
        try:
            node = self.get(Node, node_id, NodeNotFoundError)
        except NodeNotFoundError:
            raise NodeNotFoundError(f"node {node_id} not found", field=field) from None
        if node.story_id != story.id:
            raise NodeNotFoundError(f"node {node_id} not found in story {story.id}", field=field)
        return node

    def leaf_or(self, story: Story, node_id: UUID | None, field: str = "node_id") -> Node:
        """The given node of the story, or its leaf."""
        assert story.leaf_id is not None
        return self.story_node(story, node_id or story.leaf_id, field)

    def owned_node(self, tenant_id: str, node_id: UUID) -> tuple[Story, Node]:
        node = self.get(Node, node_id, NodeNotFoundError)
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
        card = self.get(Card, story.card_id, CardNotFoundError)
        cached = self._settings.get(story.id)
        if (
            cached is not None
            and cached.card_id == card.id
            and cached.card_version == card.version
            and cached.overrides == story.settings
        ):
            return cached.settings
        merged = card.settings.merged(story.settings)
        if len(self._settings) >= self.view_cache_size:
            del self._settings[next(iter(self._settings))]
        self._settings[story.id] = _MergedSettings(card.id, card.version, dict(story.settings), merged)
        return merged

    def language(self, story: Story) -> Language:
        """The language of changji's own texts in the story's prompts: set on the story or card, or the card's."""
        return self.card_of(story).data.language(self.settings(story).language)

    def card_of(self, story: Story) -> Card:
        """The story's card, even if the card was deleted after the story began."""
        assert story.card_id is not None
        return self.get(Card, story.card_id, CardNotFoundError)

    def story_of(self, node: NodeView) -> Story:
        """The story a node belongs to, without any ownership check."""
        return self.get(Story, node.story_id, StoryNotFoundError)

    def events_of(self, aggregate_id: UUID, after: int | None = None, limit: int | None = None) -> list[Any]:
        """An aggregate's events in order (those after version `after`, at most `limit`)."""
        return list(self.repository.event_store.get(aggregate_id, gt=after, limit=limit))

    # --- saving -------------------------------------------------------------------------------

    @contextmanager
    def evicting(self, *aggregates: Aggregate | None) -> Iterator[None]:
        """Evict the aggregates from the cache if the command fails after changing them."""
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

    def commit(self, *aggregates: Aggregate) -> int:
        """Save in one transaction; return the last notification id (for read-your-writes).

        A reply that is finished by this save (posted, or sealed) announces a compaction in the same
        transaction when its path is due for one — unless its story starts in this save too (an imported
        chat, which announces what its path is due itself), or its parent is saved with it (messages a
        proxied front end sent at once: the reply that answers them announces)."""
        starting = {a.id for a in aggregates if isinstance(a, Story) and a.version == len(a.pending_events)}
        saving = {a.id for a in aggregates}
        for aggregate in aggregates:
            if isinstance(aggregate, Story) and any(isinstance(e, StoryMovedToCard) for e in aggregate.pending_events):
                self._epochs[aggregate.id] = self._epochs.get(aggregate.id, 0) + 1  # (its nodes name another card)
            if not isinstance(aggregate, Node):
                continue
            announces = aggregate.story_id not in starting and aggregate.parent_id not in saving
            if announces and any(isinstance(e, FINISHED_REPLY) for e in aggregate.pending_events):
                assert aggregate.story_id is not None
                story = self.get(Story, aggregate.story_id, StoryNotFoundError)
                self.compaction.announce_if_due(aggregate, self.settings(story))
            if any(isinstance(e, RERENDERING) for e in aggregate.pending_events):
                assert aggregate.story_id is not None
                self._epochs[aggregate.story_id] = self._epochs.get(aggregate.story_id, 0) + 1
            if any(isinstance(e, SUMMARIZING) for e in aggregate.pending_events):
                assert aggregate.story_id is not None
                self._summarized.setdefault(aggregate.story_id, []).append((aggregate.id, aggregate.depth))
        try:
            recordings = self._record_aggregates(aggregates)
        except RecordConflictError:
            for aggregate in aggregates:
                self._evict(aggregate.id)
            raise ConcurrentWriteError("another write changed this first; reload and retry") from None
        for aggregate in aggregates:
            if isinstance(aggregate, Node):
                self.views.remember(aggregate.view)
        return max((r.notification.id for r in recordings), default=0)

    def commit_changed(self, *aggregates: Aggregate) -> int:
        """Commit the aggregates that have pending events (0 when none has)."""
        pending = [a for a in aggregates if a.pending_events]
        return self.commit(*pending) if pending else 0

    def _record_aggregates(self, aggregates: Sequence[Aggregate]) -> list[Recording[UUID]]:
        """What `Application.save` does for aggregates, without asking of each whether it is an event or
        collects events (isinstance against runtime Protocols costs ~20 µs per aggregate on 3.11)."""
        processing = ProcessingEvent[UUID]()
        for aggregate in aggregates:
            processing.events.extend(aggregate.collect_events())
            processing.aggregates[aggregate.id] = aggregate
        with self.write_lock:
            recordings = self._record(processing)
        self.commits += 1  # (counted before a snapshot is taken: a snapshot that fails never runs a command again)
        self._recent.extend((r.notification.id, r.domain_event) for r in recordings)
        self._take_snapshots(processing)
        self.notify(processing.events)
        return recordings

    @property
    def last_saved(self) -> int:
        """The notification position of the last event this process saved (0: none yet)."""
        return self._recent[-1][0] if self._recent else 0

    def saved_here(self, notification_id: int) -> bool:
        """Whether this process saved the event at that position, among the last `recent_size` it saved."""
        return any(position == notification_id for position, _ in reversed(self._recent))

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

    # --- following what other processes save ---------------------------------------------------

    def follow(
        self, notification_id: int, originator_id: UUID, version: int, topic: str, event: Callable[[], Any]
    ) -> None:
        """Bring this process's caches in step with an event in the store: one another process saved (another
        worker, a CLI import), or one this process saved itself, which changes nothing. Events are followed
        in the order of the log; `event()` decodes the stored event, called only where it is needed.

        A cached aggregate one version behind takes the event (as a load would have folded it), one made
        elsewhere is held from its first; one further behind is evicted (the next load reads it whole);
        one already at the version or past it is left alone. What `commit` keeps for this process's own saves is kept for these too: the
        render epochs of a story whose nodes render differently, the summaries recorded on its nodes."""
        aggregate = self._cached(originator_id)
        view = self.views.held(originator_id)
        if aggregate is not None and version <= aggregate.version:
            pass  # (saved here, or followed already, or read back whole since it was saved)
        elif aggregate is None and view is not None and version <= view.version:
            pass
        elif version == (aggregate.version if aggregate is not None else 0) + 1 and self.repository.cache is not None:
            held = event().mutate(aggregate)  # (a first event: made elsewhere, held as a save here holds it)
            self.repository.cache.put(originator_id, held)
            if isinstance(held, Node):
                self.views.remember(held.view)
        else:
            if aggregate is not None:
                self._evict(originator_id)
            self.views.forget(originator_id)
        cls = stored_class(topic)  # (by class: a moved event's old topic names it too, `domain/topics.py`)
        if cls in RERENDERING + SUMMARIZING and not self.saved_here(notification_id):
            node = self.node_aggregate(originator_id)  # (loaded when it was not cached)
            assert node.story_id is not None
            if cls in RERENDERING:
                self._epochs[node.story_id] = self._epochs.get(node.story_id, 0) + 1
            elif (node.id, node.depth) not in (summarized := self._summarized.setdefault(node.story_id, [])):
                summarized.append((node.id, node.depth))

    def _cached(self, aggregate_id: UUID) -> Aggregate | None:
        """The aggregate as this process holds it, if it does."""
        cache = self.repository.cache
        if cache is None:
            return None
        try:
            aggregate = cache.get(aggregate_id)
        except KeyError:
            return None
        return aggregate if isinstance(aggregate, Aggregate) else None

    def render_epoch(self, story_id: UUID) -> int:
        """Bumped whenever a node of the story renders differently (hidden, unhidden, revised), so
        contexts cached by projections know to start over."""
        return self._epochs.get(story_id, 0)

    def summarized(self, story_id: UUID) -> Sequence[tuple[UUID, int]]:
        """(node, depth) of every summary recorded or edited on the story's nodes by this process, in
        order: a cached window is checked against those recorded since it was made, so a summary on
        one branch leaves the windows of the others alone."""
        return self._summarized.get(story_id, ())
