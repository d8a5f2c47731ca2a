"""A node's state and how each of its events changes it (the fold). `Node` (`domain/tree/node.py`)
adds the commands that decide which events to record."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.tree.events import (
    GreetingPlaced,
    NodeHidden,
    NodeStarred,
    NodeUnhidden,
    NodeUnstarred,
    ReplyPosted,
    ReplyRevised,
    UserSpoke,
)
from domain.tree.jobs import made_due, results_of
from domain.tree.rules.drafting import Edit, apply_edits
from domain.tree.turn_events import (
    AskAnswered,
    ClientPartNoted,
    DraftAppended,
    DraftEdited,
    DraftWritten,
    PreviousReplyRead,
    ReplyOpened,
    ReplySealed,
    ReplyWithdrawn,
    SearchTermsNoted,
    TurnAsked,
    TurnStopped,
)
from domain.tree.work_events import (
    CompactionDue,
    DigestFolded,
    EpisodeSummarized,
    ScenePatched,
    SideJobDone,
    SideJobFailed,
    SideJobSkipped,
    SummaryEdited,
)
from domain.values import CompactionReason, Digest, Episode, JobKind, JobState, NodeKind, NodeView, Phase


class NodeState:
    """What a node is at its version: folded from its events, one at a time, by `when`."""

    def __init__(self) -> None:
        self.said_at: datetime | None = None
        self.story_id: UUID | None = None
        self.parent_id: UUID | None = None
        self.kind: NodeKind = "greeting"
        self.depth = 0
        self.turn = 0
        self.text = ""
        self.hidden = False
        self.starred = False
        self.revisions = 0
        self.phase: Phase = "final"
        self.draft_version = 0
        self.model = ""
        self.ask: TurnAsked | None = None
        self.previous_read: dict[UUID, int] = {}
        self.scene_patches = 0
        self.jobs: dict[JobKind, JobState] = {}
        self.job_attempts: dict[JobKind, int] = {}
        self.compaction_reason: CompactionReason | None = None
        self.episode: Episode | None = None
        self.digest: Digest | None = None
        self.client_part: str | None = None  # a proxied front end's own part of the request this reply answers
        self.search_terms: str | None = None  # the side model's search of the memory here (None: not asked)
        self._view: NodeView | None = None

    def when(self, event: Any) -> None:
        self._evolve(event)
        for rule in made_due(event):
            self.jobs[rule.kind] = "pending"
            self.job_attempts[rule.kind] = 0
        for kind in results_of(event):
            self.jobs[kind] = "done"

    def _evolve(self, event: Any) -> None:
        match event:
            case GreetingPlaced():
                self.story_id, self.kind, self.text = event.story_id, "greeting", event.text
            case UserSpoke() | ReplyPosted():
                self.story_id, self.parent_id, self.text = event.story_id, event.parent_id, event.text
                self.kind = "user" if isinstance(event, UserSpoke) else "reply"
                self.depth, self.turn, self.said_at = event.depth, event.turn, event.said_at
            case ReplyOpened():
                self.story_id, self.parent_id, self.kind = event.story_id, event.parent_id, "reply"
                self.depth, self.turn, self.model, self.phase = event.depth, event.turn, event.model, "writing"
            case ClientPartNoted():
                self.client_part = event.client_part
            case SearchTermsNoted():
                self.search_terms = event.terms
            case DraftWritten():
                self.text, self.draft_version = event.text, event.version
            case DraftAppended():
                self.text, self.draft_version = self.text + event.separator + event.text, event.version
            case DraftEdited():
                self.text = apply_edits(self.text, [Edit(e["old"], e["new"]) for e in event.edits])
                self.draft_version = event.version
            case ReplySealed():
                self.phase = "sealed"
            case TurnAsked():
                self.phase, self.ask = "waiting", event
            case AskAnswered():
                self.phase, self.ask = "writing", None
            case TurnStopped():
                self.phase = "stopped"
            case PreviousReplyRead():
                self.previous_read[event.target_id] = event.version
            case ReplyWithdrawn():
                self.phase = "withdrawn"
            case ReplyRevised():
                self.text = event.text
                self.revisions += 1
            case NodeStarred() | NodeUnstarred():
                self.starred = isinstance(event, NodeStarred)
            case NodeHidden() | NodeUnhidden():
                self.hidden = isinstance(event, NodeHidden)
            case ScenePatched():
                self.scene_patches += 1
            case SideJobFailed():
                self.job_attempts[event.kind] = event.attempt
                self.jobs[event.kind] = "failed" if event.retry_at is None else "retrying"
            case SideJobSkipped():
                self.jobs[event.kind] = "skipped"
            case SideJobDone():
                self.jobs[event.kind] = "done"
            case CompactionDue():
                self.compaction_reason = event.reason
            case EpisodeSummarized():
                self.episode = Episode(
                    event.episode_id, event.start_id, event.after_id, event.start_depth, event.first_turn,
                    event.last_turn, event.text, tuple(event.anchors), event.author,
                )  # fmt: skip
            case DigestFolded():
                self.digest = Digest(
                    event.digest_id, event.previous_id, tuple(event.absorbed), event.last_turn,
                    tuple(event.sections.items()), tuple(event.anchors), event.author,
                )  # fmt: skip
            case SummaryEdited():
                if self.episode is not None and event.text is not None and self.episode.episode_id == event.summary_id:
                    self.episode = replace(self.episode, text=event.text, edited=True)
                if self.digest is not None and event.sections is not None and self.digest.digest_id == event.summary_id:
                    merged = {**dict(self.digest.sections), **event.sections}
                    self.digest = replace(self.digest, sections=tuple(merged.items()), edited=True)
