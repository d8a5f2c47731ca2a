"""Compaction on the write side: announcing that a path is due, planning a pack and a fold from the
path's nodes, and recording episodes, digests and the user's edits of them on the nodes they cover.

A mixin of `Changji`. Recording is idempotent: an episode already on its last node with the same first
node, or a digest that already absorbed the same episodes, is not recorded twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from uuid import UUID

from domain.commanding import AppCommands
from domain.compaction import (
    Layers,
    PackPlan,
    announce,
    announce_limit,
    count_turns,
    episodes_to_fold,
    layers_from,
    plan_pack,
    uncovered,
    uncovered_turns,
)
from domain.errors import NodeNotFoundError, StoryNotFoundError, SummaryError
from domain.node import Node
from domain.scening import Settled, SideCall
from domain.story import Story
from domain.values import NodeView, StorySettings


def ancestry(load: Callable[[UUID], NodeView], node_id: UUID | None) -> Iterator[NodeView]:
    """The node and its ancestors, leaf → root, loaded lazily."""
    while node_id is not None:
        node = load(node_id)
        yield node
        node_id = node.parent_id


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


class CompactionCommands(AppCommands):
    """Mixed into `Changji`, which provides the loading and saving helpers declared here."""

    def _announce_compaction(self, reply: Node, settings: StorySettings) -> None:
        """Called as a reply is added: if its path just became due (or is still due a pack later), the
        reply announces it, which makes a compaction job. Counts at most a few packs' worth of turns."""
        if settings.pack_turns == 0 or reply.parent_id is None:
            return
        limit = announce_limit(settings)
        turns = uncovered_turns(ancestry(self.node, reply.parent_id), limit)
        if turns <= limit:
            if announce(turns, settings):
                reply.announce_compaction(turns, "auto")
        elif reply.turn % settings.pack_turns == 0:  # far behind (compaction switched on late): every K turns
            reply.announce_compaction(turns, "behind")

    def plan_compaction(self, node_id: UUID, manual: bool = False) -> CompactionPlan:
        view = self.node(node_id)
        story = self._get(Story, view.story_id, StoryNotFoundError)
        settings = self.settings(story)
        below, boundary = uncovered(ancestry(self.node, node_id))
        return CompactionPlan(
            story.id,
            settings,
            plan_pack(below, settings, manual),
            layers_from(boundary, self.node),
            self.card_of(story).data.name,
            settings.user_name,
            count_turns(below),
        )

    def story_of(self, node: NodeView) -> Story:
        return self._get(Story, node.story_id, StoryNotFoundError)

    def compaction_reason(self, node_id: UUID) -> str:
        """Why the node's compaction was announced: "auto", "behind" or "budget"."""
        return self.job_node(node_id).compaction_reason

    def compaction_under_way(self, node_id: UUID) -> bool:
        return self.job_node(node_id).jobs.get("compact") in ("pending", "retrying")

    def schedule_compaction(self, node_id: UUID, reason: str) -> int:
        """Announce a compaction on a node (the context overflowed its budget); nothing if one is pending."""
        node = self.job_node(node_id)
        if node.jobs.get("compact") in ("pending", "retrying"):  # one is under way: keep its attempts
            return 0
        with self._command(node):
            plan = self.plan_compaction(node_id)
            node.announce_compaction(plan.uncovered_turns, reason)
            return self._save(node)

    def record_episode(
        self,
        episode_id: str,
        plan: PackPlan,
        text: str,
        author: str,
        job_node: UUID | None,
        calls: Sequence[SideCall] = (),
    ) -> Settled:
        """The episode on the last node the pack covers (and the calls in the ledger of `job_node`)."""
        end = self._get(Node, plan.end.id, NodeNotFoundError)
        keeper = self.job_node(job_node) if job_node is not None and job_node != end.id else end
        touched = [end] if keeper is end else [end, keeper]
        with self._command(*touched):
            _record_calls(keeper, calls)
            done = end.episode is not None and end.episode.start_id == plan.nodes[0].id
            if not done:
                end.summarize(
                    episode_id, plan.nodes[0].id, plan.after_id, plan.nodes[0].depth, plan.first_turn,
                    plan.last_turn, text, list(plan.anchors), author,
                )  # fmt: skip
            pending = [a for a in touched if a.pending_events]
            return Settled(not done, self._save(*pending) if pending else 0)

    def record_digest(
        self, digest_id: str, layers: Layers, settings: StorySettings, sections: dict[str, str], author: str,
        job_node: UUID | None, calls: Sequence[SideCall] = (),
    ) -> Settled:  # fmt: skip
        """The digest on the last node of the last episode it absorbs (the oldest beyond episodes_kept)."""
        folded = episodes_to_fold(layers, settings)
        if not folded:
            return Settled(False, 0)
        holder = self._get(Node, folded[-1][0].id, NodeNotFoundError)
        keeper = self.job_node(job_node) if job_node is not None and job_node != holder.id else holder
        touched = [holder] if keeper is holder else [holder, keeper]
        absorbed = [episode.episode_id for _, episode in folded]
        with self._command(*touched):
            _record_calls(keeper, calls)
            done = holder.digest is not None and set(absorbed) <= set(holder.digest.absorbed)
            if not done:
                previous = layers.digest
                anchors = [*(previous[1].anchors if previous else ()), *(a for _, e in folded for a in e.anchors)]
                holder.fold_digest(
                    digest_id, previous[0].id if previous else None, absorbed, folded[-1][1].last_turn,
                    sections, list(dict.fromkeys(anchors)), author,
                )  # fmt: skip
            pending = [a for a in touched if a.pending_events]
            return Settled(not done, self._save(*pending) if pending else 0)

    def finish_job(self, node_id: UUID, kind: str, detail: str) -> Settled:
        node = self.job_node(node_id)
        if node.job_settled(kind):
            return Settled(False, 0)
        with self._command(node):
            node.finish_job(kind, detail)
            return Settled(True, self._save(node))

    def edit_summary(
        self, tenant_id: str, node_id: UUID, text: str | None, sections: dict[str, str] | None
    ) -> tuple[NodeView, int]:
        """The user's rewrite of a node's episode (`text`) or digest (`sections`)."""
        _, node = self.owned_node(tenant_id, node_id)
        if (text is None) == (sections is None):
            raise SummaryError("give either the episode's text or the digest's sections", field="text")
        with self._command(node):
            node.edit_summary(text, sections)
            return node.view, self._save(node)


def _record_calls(node: Node, calls: Sequence[SideCall]) -> None:
    for call in calls:
        node.record_call(
            call.purpose, call.model, call.prompt_tokens, call.completion_tokens, call.latency_ms, call.outcome
        )
