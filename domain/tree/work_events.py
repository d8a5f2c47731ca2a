"""Events of background work on a node: the scene's patches, the jobs' outcomes, and compaction (a
summary annotates the last node it covers). Immutable facts in the past tense; topics are forever
(`domain/topics.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import AggregateEvent

from domain.folded import Folded
from domain.values import CompactionReason, JobKind, JobState, SceneAuthor, SummaryAuthor

# --- background work annotating a node ------------------------------------------------------------


class ScenePatched(Folded, AggregateEvent):
    """A patch to the scene as it stands at this node: the scribe's reading of this reply (`author`
    "scribe"), or an edit by the user ("user"). Character names are stored already matched to known
    spellings; `warnings` lists what the merge rules refused. The snapshot at a node is the fold of
    the patches on its path, in path order, whatever order they were written in."""

    author: SceneAuthor
    patch: dict[str, Any]
    warnings: list[str]


class SideJobFailed(Folded, AggregateEvent):
    """An attempt at background work of `kind` for this node failed; it is tried again at `retry_at`,
    or never again when `retry_at` is None."""

    kind: JobKind
    attempt: int
    error: str
    retry_at: datetime | None


class SideJobSkipped(Folded, AggregateEvent):
    """Background work of `kind` for this node was settled without a result, for `reason`."""

    kind: JobKind
    reason: str


class SideJobRequeued(Folded, AggregateEvent):
    """Background work of `kind` for this node that had settled without a result (`was`: failed, given up
    after its attempts, or skipped) is due again from now, at the user's word: its attempts count afresh,
    and it keeps its place in the queue (the order it was first made due in)."""

    kind: JobKind
    was: JobState


# --- compaction: summaries annotate the last node they cover ------------------------------------------


class EpisodeSummarized(Folded, AggregateEvent):
    """One pack of turns was summarized: the episode covers the path from `start_id` (at `start_depth`;
    its parent is `after_id`, None at the root) down to this node, turns `first_turn`–`last_turn`.
    `anchors` are the starred nodes inside, quoted word for word wherever the episode is replayed.
    `author` is "model" (the side model) or "extractive" (the offline summarizer)."""

    episode_id: str
    start_id: UUID
    after_id: UUID | None
    start_depth: int
    first_turn: int
    last_turn: int
    text: str
    anchors: list[UUID]
    author: SummaryAuthor


class DigestFolded(Folded, AggregateEvent):
    """The story digest now covers the whole path from the root down to this node: the previous digest
    (on `previous_id`, if any) and the episodes `absorbed` were folded into five `sections`."""

    digest_id: str
    previous_id: UUID | None
    absorbed: list[str]
    last_turn: int
    sections: dict[str, str]
    anchors: list[UUID]
    author: SummaryAuthor


class SummaryEdited(Folded, AggregateEvent):
    """The user rewrote this node's episode (`text`) or digest (`sections`); later folds use the edit."""

    summary_id: str
    text: str | None
    sections: dict[str, str] | None


class CompactionDue(Folded, AggregateEvent):
    """With this reply its path holds `uncovered` turns after the last summary, enough for a pack (or
    more than the context window fits, `reason` "budget"): a compaction job for the path is due.
    The turns are counted up to a bound (`domain.tree.rules.compaction.announce_limit`, so that announcing
    costs the same however long the story): a path further behind records the bound plus one."""

    uncovered: int
    reason: CompactionReason


class SideJobDone(Folded, AggregateEvent):
    """Background work of `kind` for this node finished; `detail` says what it did (where its result is)."""

    kind: JobKind
    detail: str
