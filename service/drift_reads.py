"""What a context reads of the character's keeping: its identity anchor, the drift on the path, and the
re-anchoring block they put before the user's words; and the drift report `GET …/drift` answers with.
Judgements are remembered (`projections/context/drift.py`): the next turn's walks two nodes, and a cold
path's first depths are read in bulk, one query and one preload."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from domain.application import Changji
from domain.card.anchor import identity_anchor
from domain.card.card import Card
from domain.language import Language
from domain.values import NodeView, StorySettings
from projections.context.drift import EARLY_DEPTH, DriftAt, DriftCache, drift_at, reanchor_block
from projections.context.records import TailBlock
from projections.context.system_prompt import fill_macros
from service.lineages import Branch, Lineage, Prefix, head

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DriftReport:
    """The drift at a node, with what it means for the next turn: `forced` (a forced re-anchoring comes
    after the reply judged), `periodic_turn` (the next turn the periodic one comes at, None when off)."""

    at: NodeView
    drift: DriftAt
    anchor: str
    derived: bool
    every: int
    next_periodic: int | None
    language: Language


class DriftReads:
    def __init__(self, app: Changji, paths: Callable[[UUID, NodeView], Lineage | Branch | Prefix]) -> None:
        """`paths(story_id, node)`: the path to a node as the story's lineage knows it (`service/lineages.py`,
        shared with recall: a cold story's costs one query of the read models, once)."""
        self.app, self.paths = app, paths
        self.cache = DriftCache()

    def at(self, card: Card, settings: StorySettings, story_id: UUID, node: NodeView) -> DriftAt:
        language = card.data.language(settings.language)
        epoch = self.app.render_epoch(story_id)

        read: list[NodeView] = []

        def first_nodes(node_id: UUID) -> list[NodeView]:
            """The nodes of the path's first EARLY_DEPTH depths, root first, read in bulk (once: every reply
            below them a judgement follows back shares them)."""
            if not read:
                ids = [UUID(i) for i in head(self.paths(story_id, self.app.node(node_id)), EARLY_DEPTH)]
                self.app.preload(ids)
                read.extend(self.app.node(i) for i in ids)
            return read

        return drift_at(node, self.app.node, settings, language, self.cache, epoch, first_nodes)

    def reanchor(
        self, card: Card, settings: StorySettings, story_id: UUID, leaf: NodeView, saved: UUID
    ) -> TailBlock | None:
        """The re-anchoring block of the context at a user leaf (None elsewhere, or when none is due):
        the drift judged at the last saved node above it (a proxied request's words are not saved yet)."""
        if leaf.kind != "user" or leaf.hidden:
            return None
        return self._block(card, settings, story_id, leaf.turn, self.app.node(saved))

    def upcoming_tokens(
        self, card: Card, settings: StorySettings, story_id: UUID, reply_id: UUID, count: Callable[[str], int]
    ) -> int:
        """The tokens of the re-anchoring block the turn after a reply will carry (0: none due): what the
        reply's budget test reserves for it."""
        try:  # (the reply is written: its budget test never fails it)
            reply = self.app.node(reply_id)
            block = self._block(card, settings, story_id, reply.turn + 1, reply)
        except Exception:
            log.exception("could not judge the drift at %s", reply_id)
            return 0
        return count(block.text) if block is not None else 0

    def _block(
        self, card: Card, settings: StorySettings, story_id: UUID, turn: int, above: NodeView
    ) -> TailBlock | None:
        every = settings.reanchor_turns
        periodic = every > 0 and turn > 0 and turn % every == 0
        drift = self.at(card, settings, story_id, above)
        if not (periodic or drift.forced):
            return None
        char, user = card.data.name, settings.user_name
        language = card.data.language(settings.language)
        anchor = identity_anchor(card.data, settings, rules=False)  # (the card's instructions come just before)
        fill = lambda text: fill_macros(text, char, user)  # noqa: E731
        return reanchor_block(anchor, char, user, language, turn, every, drift, fill)

    def report_at(self, tenant_id: str, story_id: UUID, at: UUID | None) -> DriftReport:
        """The drift report at a node of the story (default: its leaf)."""
        story = self.app.story(tenant_id, story_id)
        node = self.app.leaf_or(story, at, "at").view
        return self.report(self.app.card_of(story), self.app.settings(story), story.id, node)

    def report(self, card: Card, settings: StorySettings, story_id: UUID, node: NodeView) -> DriftReport:
        drift = self.at(card, settings, story_id, node)
        every = settings.reanchor_turns
        turn = node.turn + (node.kind != "user")  # the turn whose context the report is for
        upcoming = None if every <= 0 else max(every, -(-turn // every) * every)
        written = settings.identity_anchor.strip()
        return DriftReport(
            node, drift, identity_anchor(card.data, settings), not written, every, upcoming,
            card.data.language(settings.language),
        )  # fmt: skip
