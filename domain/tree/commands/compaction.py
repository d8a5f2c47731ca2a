"""Compaction on the write side: announcing that a path is due, planning a pack and a fold from the
path's nodes, and recording episodes, digests and the user's edits of them on the nodes they cover.

Recording is idempotent: an episode already on its last node with the same first node, or a digest
that already absorbed the same episodes, is not recorded twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from domain.aggregates import CommandGroup, Written
from domain.card.anchor import identity_anchor
from domain.errors import NodeNotFoundError, SummaryError
from domain.language import Language
from domain.tree.commands.base import TreeAggregates
from domain.tree.commands.jobs import Settled, SideCall, record_calls
from domain.tree.jobs import UNDER_WAY
from domain.tree.node import Node
from domain.tree.rules.compaction import (
    Layers,
    PackPlan,
    announce,
    announce_limit,
    count_turns,
    episodes_to_fold,
    layers_from,
    plan_pack,
    summary_of,
    uncovered,
    uncovered_turns,
)
from domain.tree.rules.paths import walk_up
from domain.values import CompactionReason, NodeView, StorySettings, SummaryAuthor


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What compaction at a node would do now: the next pack (if due) and the summary layers above."""

    story_id: UUID
    settings: StorySettings
    pack: PackPlan | None
    layers: Layers
    char_name: str
    user_name: str
    uncovered_turns: int
    language: Language = "zh"
    anchor: str = ""  # the character's identity anchor, which the summarizers' instructions carry


class CompactionCommands(CommandGroup[TreeAggregates]):
    def announce_if_due(self, reply: Node, settings: StorySettings) -> None:
        """Called as a reply is added: if its path just became due (or is still due a pack later), the
        reply announces it, which makes a compaction job. Counts at most a few packs' worth of turns."""
        if settings.pack_turns == 0 or reply.parent_id is None:
            return
        limit = announce_limit(settings)
        turns = uncovered_turns(walk_up(self.app.node, reply.parent_id), limit)
        if turns <= limit:
            if announce(turns, settings):
                reply.announce_compaction(turns, "auto")
        elif reply.turn % settings.pack_turns == 0:  # far behind (compaction switched on late): every K turns
            reply.announce_compaction(turns, "behind")

    def announce_imported(self, reply: Node, settings: StorySettings) -> None:
        """The last reply of an imported chat: nothing on its path is summarized yet, so every turn is
        uncovered; it announces the compaction that catches up, when the path is due one."""
        limit = announce_limit(settings)
        if settings.pack_turns and reply.turn >= settings.keep_turns + settings.pack_turns:
            reply.announce_compaction(min(reply.turn, limit + 1), "auto" if reply.turn <= limit else "behind")

    def plan_compaction(self, node_id: UUID, manual: bool = False) -> CompactionPlan:
        view = self.app.node(node_id)
        story = self.app.story_of(view)
        settings, card = self.app.settings(story), self.app.card_of(story).data
        below, boundary = uncovered(walk_up(self.app.node, node_id))
        return CompactionPlan(
            story.id,
            settings,
            plan_pack(below, settings, manual),
            layers_from(boundary, self.app.node),
            card.name,
            settings.user_name,
            count_turns(below),
            card.language(settings.language),
            identity_anchor(card, settings),
        )

    def first_unheld(self, node_id: UUID) -> UUID | None:
        """Walking up from the node to its summary boundary as a plan does, the first node whose view
        this process does not hold (None: the plan's walk reads nothing from the store)."""
        current: UUID | None = node_id
        while current is not None:
            view = self.app.held_view(current)
            if view is None:
                return current
            if summary_of(view):
                return None
            current = view.parent_id
        return None

    def compaction_reason(self, node_id: UUID) -> CompactionReason | None:
        """Why the node's compaction was announced."""
        return self.app.node_aggregate(node_id).compaction_reason

    def compaction_under_way(self, node_id: UUID) -> bool:
        return self.app.node_aggregate(node_id).jobs.get("compact") in UNDER_WAY

    def schedule_compaction(self, node_id: UUID, reason: CompactionReason) -> int:
        """Announce a compaction on a node; nothing if one is pending (it keeps its attempts)."""
        node = self.app.node_aggregate(node_id)
        if node.jobs.get("compact") in UNDER_WAY:
            return 0
        settings = self.app.settings(self.app.story_of(self.app.node(node_id)))
        turns = uncovered_turns(walk_up(self.app.node, node_id), announce_limit(settings))  # bounded
        with self.app.evicting(node):
            node.announce_compaction(turns, reason)
            return self.app.commit(node)

    def schedule_budget_pack(self, leaf_id: UUID) -> int:
        """A context at `leaf_id` overflowed its budget: if there is something to pack beyond the kept
        turns, a compaction is announced on the leaf's reply (once while one is pending); 0 if not."""
        node = self.app.node(leaf_id)
        reply = node if node.kind == "reply" else self.app.node(node.parent_id) if node.parent_id else None
        if reply is None or reply.kind != "reply" or self.compaction_under_way(reply.id):
            return 0
        settings = self.app.settings(self.app.story_of(reply))
        below, _ = uncovered(walk_up(self.app.node, reply.id), settings.keep_turns + 1)  # bounded: enough to say
        if count_turns(below) <= settings.keep_turns:
            return 0
        return self.schedule_compaction(reply.id, "budget")

    def record_episode(
        self,
        episode_id: str,
        plan: PackPlan,
        text: str,
        author: SummaryAuthor,
        job_node: UUID | None,
        calls: Sequence[SideCall] = (),
    ) -> Settled:
        """The episode on the last node the pack covers (and the calls in the ledger of `job_node`)."""
        end = self.app.get(Node, plan.end.id, NodeNotFoundError)
        keeper = self.app.node_aggregate(job_node) if job_node is not None and job_node != end.id else end
        touched = [end] if keeper is end else [end, keeper]
        with self.app.evicting(*touched):
            record_calls(keeper, calls)
            done = end.episode is not None and end.episode.start_id == plan.nodes[0].id
            if not done:
                end.summarize(
                    episode_id, plan.nodes[0].id, plan.after_id, plan.nodes[0].depth, plan.first_turn,
                    plan.last_turn, text, list(plan.anchors), author,
                )  # fmt: skip
            return Settled(not done, self.app.commit_changed(*touched))

    def record_digest(
        self, digest_id: str, layers: Layers, settings: StorySettings, sections: dict[str, str],
        author: SummaryAuthor, job_node: UUID | None, calls: Sequence[SideCall] = (),
    ) -> Settled:  # fmt: skip
        """The digest on the last node of the last episode it absorbs (the oldest beyond episodes_kept)."""
        folded = episodes_to_fold(layers, settings)
        if not folded:
            return Settled(False, 0)
        holder = self.app.get(Node, folded[-1][0].id, NodeNotFoundError)
        keeper = self.app.node_aggregate(job_node) if job_node is not None and job_node != holder.id else holder
        touched = [holder] if keeper is holder else [holder, keeper]
        absorbed = [episode.episode_id for _, episode in folded]
        with self.app.evicting(*touched):
            record_calls(keeper, calls)
            done = holder.digest is not None and set(absorbed) <= set(holder.digest.absorbed)
            if not done:
                previous = layers.digest
                anchors = [*(previous[1].anchors if previous else ()), *(a for _, e in folded for a in e.anchors)]
                holder.fold_digest(
                    digest_id, previous[0].id if previous else None, absorbed, folded[-1][1].last_turn,
                    sections, list(dict.fromkeys(anchors)), author,
                )  # fmt: skip
            return Settled(not done, self.app.commit_changed(*touched))

    def edit_summary(
        self, tenant_id: str, node_id: UUID, text: str | None, sections: dict[str, str] | None
    ) -> Written[NodeView]:
        """The user's rewrite of a node's episode (`text`) or digest (`sections`)."""
        _, node = self.app.owned_node(tenant_id, node_id)
        if (text is None) == (sections is None):
            raise SummaryError("give either the episode's text or the digest's sections", field="text")
        with self.app.evicting(node):
            node.edit_summary(text, sections)
            return Written(node.view, self.app.commit(node))
