"""Composite reads of a story, over the aggregates and the read models: the context for the next turn,
the summary layers, the scene at a node, the path, a replay. They load aggregates, so they run where
commands do (`Executor.load`); the render and window caches they keep are theirs alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import Any
from uuid import UUID

from domain.application import Changji
from domain.card.anchor import identity_anchor
from domain.card.card import Card
from domain.card.lore import LoreBookView, LoreEntry
from domain.card.rules.lore import search_lore
from domain.errors import StoryNotFoundError
from domain.memory.resident import RESIDENT_CHARS
from domain.ports import TokenCounter
from domain.texts import CONTEXT_TEXTS
from domain.tree.commands.compaction import CompactionPlan
from domain.tree.draft_tools import LoreFound
from domain.tree.rules.paths import project_path, walk_up
from domain.tree.rules.scene import Roster, SceneSnapshot
from domain.tree.story import Story
from domain.values import NodeView, Recollection, StorySettings
from projections.context.assemble import assemble_context, leaves_turns_out
from projections.context.recall import recall_line
from projections.context.records import Context
from projections.context.relayed import ClientPart, relayed
from projections.context.system_prompt import fill_macros
from projections.context.window import RenderCache, WindowCache
from projections.read_models.scenes import SceneAt
from projections.read_models.store import ReadModels
from projections.recall.story_index import Hit
from service.card_memory_reads import CardMemoryReads
from service.drift_reads import DriftReads
from service.event_records import event_record
from service.lineages import Lineages, OnPath
from service.lore import LoreShelf
from service.recall import Recall

log = logging.getLogger(__name__)
VISIBLE_BLOCKS = ("greeting", "verbatim", "user")
LORE_ANSWER_CHARS = 4000  # of an entry's content a lorebook_search answer carries
RECALL_SPARE = 20  # passages recalled past recall_k, for those the window takes back word for word
RECALL_SECONDS = 5.0  # a recall still running after this long is given up: the turn goes on without it
CLIENT_PARTS = 1024  # manifests of proxied front ends' parts of their requests kept read
CLIENT_TEXT_CHARS = 4_000_000  # ... and the texts they name
REFITS = 4  # assemblies of a proxied context at most, each smaller by what the last went over its budget


@dataclass(frozen=True, slots=True)
class SummariesAt:
    """The summary layers on the path to `node`, as compaction sees them there."""

    node: NodeView
    plan: CompactionPlan


@dataclass(frozen=True, slots=True)
class Replayed:
    """A page of a path's replay: where it ends, its steps, and the depth the next page starts at."""

    end_id: UUID
    steps: list[dict[str, Any]]
    next_depth: int | None


class StoryViews:
    def __init__(
        self,
        app: Changji,
        store: ReadModels,
        counter: TokenCounter,
        recall: Recall | None = None,
        recall_seconds: float = RECALL_SECONDS,
        blobs: Callable[[str], bytes | None] | None = None,
    ) -> None:
        self.app, self.store, self.counter, self.recall = app, store, counter, recall
        self.recall_seconds = recall_seconds
        self._blobs = blobs  # where a proxied front end's own part of its requests is kept
        self._parts: dict[str, bytes | None] = {}  # manifests by their blobs (None: not kept)
        self._texts: dict[str, str] = {}  # the texts of parts, by their blobs
        self._text_chars = 0
        self._parting = threading.Lock()  # (views are read on several threads)
        self._probe = threading.local()  # `recalls`: a thread's assembly that only notes whether it recalls
        self.renders = RenderCache(counter)
        self.windows = WindowCache()
        self._lineages = Lineages(ancestry=store.ancestry)
        self.lore = LoreShelf(app)
        self._assembled: dict[UUID, int] = {}  # story → its render epoch at its last context
        self.card_memory = CardMemoryReads(app, store)
        self.drift = DriftReads(app, lambda story_id, node: self._lineages.at(story_id, node, self.app.node))

    def context(self, tenant_id: str, story_id: UUID, at: UUID | None) -> Context:
        """The context for the next turn at a node (default: the leaf). A read: it writes nothing. Where
        a proxied front end's request came (`ClientPartNoted`), it is the context as the proxy sends it
        upstream, with the client's own part of the last request there — at a user node, that of its
        latest reply that has one; at a reply, its own system messages."""
        story = self.app.story(tenant_id, story_id)
        node = self.app.leaf_or(story, at, "at").view
        part = self.noted_part(node)
        return self._assemble(story, node.id) if part is None else self._relayed(story, node, part)

    def relayed_context(
        self,
        tenant_id: str,
        story_id: UUID,
        at: UUID,
        part: ClientPart,
        budget: int | None = None,
        planned: Sequence[NodeView] = (),
    ) -> Context:
        """The context the chat-completions proxy sends upstream at a user node: the client's own system
        prompt instead of the card's, its blocks and prefill where it had them (`projections/context/
        relayed.py`), the rest as any context (the main model there has the client's tools, not changji's).
        `budget`: the tokens it may hold in all, the client's own part included (None: the story's window);
        `planned`: the nodes down to `at` the request adds, not saved before the upstream answers."""
        story = self.app.story(tenant_id, story_id)
        node = planned[-1] if planned and planned[-1].id == at else self.app.leaf_or(story, at, "at").view
        return self._relayed(story, node, part, budget, planned)

    def _relayed(
        self,
        story: Story,
        node: NodeView,
        part: ClientPart,
        budget: int | None = None,
        planned: Sequence[NodeView] = (),
    ) -> Context:
        if budget is None or node.kind != "user":
            assembled = self._assemble(story, node.id, fixed_prompt=part.prompt, budget=budget, planned=planned)
            return relayed(assembled, part, self.renders.count) if node.kind == "user" else assembled
        # `budget` counts messages as the upstream gets them (each its text and a message's overhead). The
        # client's part besides its prompt is sent as it came: its messages are taken first (and its
        # system messages go one by one, where the assembly had one); a context still over (its blocks
        # counted by their texts, messages merged or split) is assembled again, smaller by the excess.
        count = self.renders.count  # (a message's tokens: its text's and a message's overhead)
        taken = sum(count(text) for text in [*part.blocks, *part.after, *([part.prefill] if part.prefill else [])])
        if len(part.fixed) > 1:
            taken += max(sum(count(text) for text in part.fixed) - count(part.prompt), 0)
        room = max(budget - taken, 0)
        for _ in range(REFITS):
            assembled = self._assemble(story, node.id, fixed_prompt=part.prompt, budget=room, planned=planned)
            context = relayed(assembled, part, count)
            over = sum(count(m.content) for m in context.messages) - budget
            if over <= 0 or room == 0:
                break
            room = max(room - over, 0)
        return context

    def proxy_budget(self, tenant_id: str, story_id: UUID, sent: Callable[[int], int], default: str) -> int | None:
        """The tokens a proxied request's context may hold: what the client sent (`sent(most)` counts it,
        stopping past `most`), never more than the story's own budget; None when the story's settings (or,
        on auto, `default`) say the story's window decides."""
        settings = self.app.settings(self.app.story(tenant_id, story_id))
        rule = default if settings.proxy_budget == "auto" else settings.proxy_budget
        if rule == "story":
            return None
        own = max(settings.context_window - settings.reply_reserve, 0)
        return min(sent(own), own)

    def noted_part(self, node: NodeView) -> ClientPart | None:
        """The client's part of the proxied request a reply answers; at a user node, of its latest reply
        that has one (None: no proxied request came there)."""
        if node.kind == "user":
            replies = (self.app.node(UUID(row["id"])) for row in reversed(self.store.children(node.id)))
            node = next((reply for reply in replies if reply.client_part is not None), node)
        name = node.client_part
        if name is None or self._blobs is None:
            return None
        if name not in self._parts:
            manifest = self._blobs(name)
            with self._parting:
                self._parts[name] = manifest
                while len(self._parts) > CLIENT_PARTS:
                    del self._parts[next(iter(self._parts))]
            if manifest is None:  # (kept before its event: only a lost service database leaves it out)
                log.warning("the client part %s of node %s is not kept: its context is the card's", name, node.id)
        manifest = self._parts.get(name)
        part = ClientPart.from_manifest(manifest, self._text) if manifest is not None else None
        if manifest is not None and part is None:
            log.warning("a text of the client part %s is not kept: its context is the card's", name)
            with self._parting:
                self._parts[name] = None  # (told once)
        return part

    def _text(self, name: str) -> str | None:
        text = self._texts.get(name)
        if text is None and self._blobs is not None:
            data = self._blobs(name)
            text = data.decode() if data is not None else None
            if text is not None:
                with self._parting:
                    if name not in self._texts:
                        self._texts[name] = text
                        self._text_chars += len(text)
                    while self._text_chars > CLIENT_TEXT_CHARS and len(self._texts) > 1:
                        self._text_chars -= len(self._texts.pop(next(iter(self._texts))))
        return text

    def engine_context(self, tenant_id: str, story_id: UUID, at: UUID | None) -> Context:
        """The context engine mode sends: the main model has tools (lore hits by title unless set)."""
        story = self.app.story(tenant_id, story_id)
        return self._assemble(story, self.app.leaf_or(story, at, "at").id, tools=True)

    def recall_query(self, tenant_id: str, story_id: UUID, at: UUID | None) -> str | None:
        """The words the context at a node recalls for: the node's text when it is the user's, else None."""
        story = self.app.story(tenant_id, story_id)
        node = self.app.leaf_or(story, at, "at").view
        return node.text if node.kind == "user" and self._can_recall(story.id) else None

    def pack_if_over_budget(
        self, tenant_id: str, story_id: UUID, reply_id: UUID, fixed_prompt: str | None = None
    ) -> int:
        """After a reply is added: when the context that follows it would leave turns out for the story's
        budget, a compaction is announced on the reply (`CompactionDue`, reason budget); the position, or 0.
        The write that changed the path decides, so a read of the context never has to. `fixed_prompt`:
        the system prompt a proxied client sends instead of the card's. (A proxied client's own smaller
        budget does not announce: it sits at the edge of what the client sends turn after turn, and would
        announce a pack of a turn or two at every reply; the story's own pace packs, and recall reaches
        what the client's budget leaves out.)"""
        story = self.app.story(tenant_id, story_id)
        settings, card = self.app.settings(story), self.app.card_of(story)
        recall_share = settings.recall_room if settings.recall_k and self._can_recall(story.id) else 0
        recall_share += self._memory_reserve(card, settings, story.id)  # (and the next turn's re-anchoring:)
        recall_share += self.drift.upcoming_tokens(card, settings, story.id, reply_id, self.renders.count_raw)
        over = leaves_turns_out(  # the next turn recalls into its share
            card.data, settings, walk_up(self.app.node, reply_id), self.renders, self.windows,
            self.app.render_epoch(story.id), self.app.node, self._summarized(story.id), recall_share,
            self.app.summarized(story.id), self._lore(card, story.id, reply_id), fixed_prompt,
            identity_anchor(card.data, settings),
        )  # fmt: skip
        if not over:
            return 0
        try:  # never fail the reply's own write for it
            return self.app.compaction.schedule_budget_pack(reply_id)
        except Exception:
            log.exception("could not schedule a compaction for %s", reply_id)
            return 0

    def recalls(self, assemble: Callable[[], Context]) -> bool:
        """Whether the context `assemble` makes (here, on this thread) recalls: some of its path lies outside
        its window and the story has an index — assembled as it will be, recall itself not run (its
        windows and renders stay cached for the assembly that follows)."""
        calls: list[int] = []
        outer, self._probe.calls = getattr(self._probe, "calls", None), calls
        try:
            assemble()
        finally:
            self._probe.calls = outer
        return bool(calls)

    def warm(self, story_id: UUID) -> bool:
        """Whether this process assembled a context of the story since it last rendered differently: its
        nodes are loaded and rendered, and the next context (or a reply's budget test) extends a cached
        window, or at worst renders a window again from cached nodes (a summary landed in it) — a few
        ms, short enough for the event loop. A cold one loads and renders the whole window (after a
        start: a long story's, seconds), on the writer thread. (Read without the domain's lock:
        dictionary reads, at worst one just out of date.)"""
        epoch = self._assembled.get(story_id)
        return epoch is not None and epoch == self.app.render_epoch(story_id)

    def _assemble(
        self,
        story: Story,
        leaf: UUID,
        tools: bool = False,
        fixed_prompt: str | None = None,
        budget: int | None = None,
        planned: Sequence[NodeView] = (),
    ) -> Context:
        """The context at `leaf`; `planned`: nodes not saved yet that end the path there (root→leaf; a
        proxied request's words, whose context is sent before they are recorded), in the path and the
        window, the rest — scene, recall's path, lore's — as at the last saved node above them."""
        settings, card = self.app.settings(story), self.app.card_of(story)
        if budget is not None:  # (a proxied client's budget, its reply reserved by the client)
            settings = settings.model_copy(update={"context_window": budget, "reply_reserve": 0})
        bodies = settings.lore_bodies == "full" or (settings.lore_bodies == "auto" and not tools)
        context = self._assemble_with(story, leaf, settings, card, bodies, tools, fixed_prompt, planned)
        self._assembled[story.id] = self.app.render_epoch(story.id)
        return context

    def _assemble_with(
        self, story: Story, leaf: UUID, settings: StorySettings, card: Card, bodies: bool, tools: bool,
        fixed_prompt: str | None, planned: Sequence[NodeView] = (),
    ) -> Context:  # fmt: skip
        node_of, saved = self.app.node, leaf
        if planned:
            unsaved = {node.id: node for node in planned}
            node_of = lambda node_id: unsaved.get(node_id) or self.app.node(node_id)  # noqa: E731
            assert planned[0].parent_id is not None
            saved = planned[0].parent_id
        return assemble_context(
            card.data,
            settings,
            walk_up(node_of, leaf),
            self.renders,
            self.windows,
            self.app.render_epoch(story.id),
            self.scene_of(saved),
            node_of,
            self._summarized(story.id),
            self._recaller(story.id, saved, settings, node_of(leaf)) if self._can_recall(story.id) else None,
            self.app.summarized(story.id),
            self._lore(card, story.id, saved),
            bodies,
            tools,
            fixed_prompt,
            time.perf_counter,
            *self.card_memory.of(card, settings, story.id),
            story.prelude,
            identity_anchor(card.data, settings),
            self.drift.reanchor(card, settings, story.id, node_of(leaf), saved),
        )

    def _memory_reserve(self, card: Card, settings: StorySettings, story_id: UUID) -> int:
        """The tokens the card's memory may take in the next context: its resident summary (at most its
        cap) and the 【往事回忆】 block's share (half the recall share, as when the story recalls too)."""
        resident, recall = self.card_memory.of(card, settings, story_id)
        budget = max(settings.context_window - settings.reply_reserve, 0)
        tokens = self.renders.count_raw(resident.text[:RESIDENT_CHARS]) if resident is not None else 0
        return tokens + (min(settings.recall_tokens // 2, budget // 8) if recall is not None else 0)

    def lore_at(self, tenant_id: str, story_id: UUID, reply_id: UUID, query: str, limit: int) -> list[LoreFound]:
        """The main model's `lorebook_search` while it writes a reply: the card's entries for `query` as the
        path to the reply sees them (the model's own entries of abandoned branches left out)."""
        story = self.app.story(tenant_id, story_id)
        card, user = self.app.card_of(story), self.app.settings(story).user_name
        books = self._lore(card, story.id, reply_id)
        found = search_lore(books, query, char=card.data.name, user=user, limit=limit)
        return [
            (fill_macros(entry.label, card.data.name, user), _clipped(fill_macros(entry.content, card.data.name, user)))
            for _, _, entry in found
        ]

    def search_lore(self, card: Card, query: str, limit: int) -> list[tuple[int, str, LoreEntry]]:
        """The card's lore (every book, the model's entries from all stories) scored for `query`."""
        books = self.lore.books(card, current=self._current_paths())
        return search_lore(books, query, char=card.data.name, user=card.settings.user_name, limit=limit)

    def _lore(self, card: Card, story_id: UUID, leaf: UUID) -> list[LoreBookView]:
        return self.lore.books(
            card, story_id, lambda: self.lineage(story_id, self.app.node(leaf)), self._current_paths()
        )

    def _current_paths(self) -> Callable[[UUID, UUID], bool]:
        """Whether a node is on its story's current path (a deleted story has none), each story's path
        made once for the caller."""
        paths: dict[UUID, OnPath | None] = {}

        def current(story_id: UUID, node_id: UUID) -> bool:
            if story_id not in paths:
                story = self.app.get(Story, story_id, StoryNotFoundError)
                leaf = None if story.deleted else story.leaf_id
                paths[story_id] = self.lineage(story_id, self.app.node(leaf)) if leaf is not None else None
            path = paths[story_id]
            return path is not None and str(node_id) in path

        return current

    def _summarized(self, story_id: UUID) -> bool:
        """Whether the story has a summary anywhere: per the read models, or per this process's writes
        the read models may not have folded yet (a window cut by the budget then looks for it)."""
        return self.store.has_summaries(story_id) or bool(self.app.summarized(story_id))

    def _can_recall(self, story_id: UUID) -> bool:
        """Whether the story has an index to recall from (none yet: one is asked for, and this context
        keeps its whole budget for the window)."""
        if self.recall is None:
            return False
        if self.recall.index(story_id) is None:
            self.recall.refresh_soon(story_id)
            return False
        return True

    def _recaller(
        self, story_id: UUID, leaf: UUID, settings: StorySettings, said: NodeView | None = None
    ) -> Callable[[int, frozenset[str]], Sequence[Hit]]:
        """Recall for the leaf's words (or those `said` below it and not saved yet) and the side model's
        search for them, over passages on its path (the lineage is moved there first)."""

        def recall(before_depth: int, shown_episodes: frozenset[str]) -> Sequence[Hit]:
            assert self.recall is not None
            probe = getattr(self._probe, "calls", None)
            if probe is not None:
                probe.append(before_depth)
                return []
            node = self.app.node(leaf)
            lineage = self.lineage(story_id, node)
            words = said or node
            hits = self.recall.search_within(
                self.recall_seconds, story_id, words.text, settings.recall_k, before_depth, lineage.__contains__,
                shown_episodes if settings.recall_summaries else None,
                words.search_terms if settings.recall_rewrite else None, RECALL_SPARE,
            )  # fmt: skip
            self.app.preload([UUID(str(hit.row["node_id"])) for hit in hits])  # (their dates: read in one query)
            return hits

        return recall

    def lineage(self, story_id: UUID, leaf: NodeView) -> OnPath:
        """The nodes on the path to `leaf` (`service/lineages.py`: the walk costs what changed since)."""
        return self._lineages.at(story_id, leaf, self.app.node)

    def recall_at(self, tenant_id: str, story_id: UUID, query: str, k: int, at: UUID | None) -> list[Hit]:
        """What recall finds for `query` on the path to a node (default: the leaf), whatever the window:
        every archived turn of the path up to that node."""
        story = self.app.story(tenant_id, story_id)
        node = self.app.leaf_or(story, at, "at").view
        if self.recall is None:
            return []
        lineage = self.lineage(story.id, node)
        return self.recall.search_within(self.recall_seconds, story.id, query, k, node.depth + 1, lineage.__contains__)

    def memory_at(self, tenant_id: str, story_id: UUID, reply_id: UUID, query: str, k: int) -> list[Recollection]:
        """The main model's `memory_search` while it writes a reply: the best `k` passages on the path
        up to the user's words it answers (whatever the window), as lines in story order."""
        story = self.app.story(tenant_id, story_id)
        reply = self.app.node(reply_id)
        if self.recall is None or reply.parent_id is None or reply.story_id != story.id:
            return []
        words = self.app.node(reply.parent_id)
        lineage = self.lineage(story.id, words)
        hits = self.recall.search_within(self.recall_seconds, story.id, query, k, words.depth + 1, lineage.__contains__)
        card, settings = self.app.card_of(story).data, self.app.settings(story)
        user, texts = settings.user_name, CONTEXT_TEXTS[card.language(settings.language)]
        hits.sort(key=lambda hit: hit.story_order)
        return [
            Recollection(
                UUID(hit.row["node_id"]),
                "episode" if hit.episode else "turn",
                recall_line(hit, card.name, user, fill_macros, texts),
            )
            for hit in hits
        ]

    def summaries(self, tenant_id: str, story_id: UUID, at: UUID | None) -> SummariesAt:
        """The summary layers on the path to a node of the story (default: the leaf)."""
        node = self.app.leaf_or(self.app.story(tenant_id, story_id), at, "at").view
        return SummariesAt(node, self.app.compaction.plan_compaction(node.id))

    def scene_of(self, node_id: UUID) -> SceneAt | None:
        """The scene at a node, also right after a write the read models have not folded yet."""
        return self.store.scene_on_path(n.id for n in walk_up(self.app.node, node_id))

    def state_at(self, node_id: UUID) -> tuple[SceneSnapshot, Roster]:
        """The snapshot and roster at a node (empty when nothing on its path was patched)."""
        scene = self.scene_of(node_id)
        return (scene.snapshot, scene.roster) if scene else (SceneSnapshot(), Roster())

    def path(self, tenant_id: str, story_id: UUID, at: UUID | None, limit: int | None) -> list[NodeView]:
        leaf = self.app.leaf_or(self.app.story(tenant_id, story_id), at, "at").id
        return project_path(self.app.node, leaf, limit)

    def replay(self, tenant_id: str, story_id: UUID, at: UUID | None, from_depth: int, limit: int) -> Replayed:
        """The path's node events in order (depths from_depth…), each with the context after that step."""
        story = self.app.story(tenant_id, story_id)
        end = self.app.leaf_or(story, at, "at").view
        steps = list(takewhile(lambda n: n.depth >= from_depth, walk_up(self.app.node, end.id)))
        steps = steps[::-1][:limit]
        out = []
        for node in steps:  # each step's window extends the one before: a page costs about one walk
            ctx = self._assemble(story, node.id)
            out.append(
                {
                    "node_id": node.id, "kind": node.kind, "depth": node.depth, "turn": node.turn,
                    "events": [event_record(e) for e in self.app.events_of(node.id)],
                    "context_messages": len(ctx.messages), "context_tokens": ctx.tokens,
                    "visible_nodes": sum(len(b.node_ids) for b in ctx.explain if b.what in VISIBLE_BLOCKS),
                }
            )  # fmt: skip
        more = steps[-1].depth + 1 if steps and steps[-1].depth < end.depth else None
        return Replayed(end.id, out, more)


def _clipped(text: str) -> str:
    return text if len(text) <= LORE_ANSWER_CHARS else text[:LORE_ANSWER_CHARS] + "…"
