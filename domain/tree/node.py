"""The Node aggregate: one greeting, user or reply node of a story tree, with its annotations."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.errors import (
    DraftSealedError,
    DraftVersionConflictError,
    EmptyTextError,
    InvalidParentError,
    JobNotFoundError,
    NodeKindError,
    SummaryError,
    TurnStateError,
)
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
from domain.tree.jobs import REQUEUED_FROM, SETTLED
from domain.tree.node_state import NodeState
from domain.tree.rules.drafting import APPEND_SEPARATOR, Edit, apply_edits, read_range, search
from domain.tree.turn_events import (
    AskAnswered,
    ClientPartNoted,
    DraftAppended,
    DraftEdited,
    DraftRead,
    DraftRefused,
    DraftSearched,
    DraftWritten,
    MemorySearched,
    ModelCalled,
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
    SideJobRequeued,
    SideJobSkipped,
    SummaryEdited,
)
from domain.values import (
    DIGEST_SECTIONS,
    CallPurpose,
    CompactionReason,
    JobKind,
    NodeKind,
    NodeView,
    Phase,
    SceneAuthor,
    StopReason,
    SummaryAuthor,
)

PHASE_ZH: dict[Phase, str] = {  # a reply's phase as a refusal tells a Chinese story's model
    "final": "已定稿", "writing": "还在写", "waiting": "在等用户作答", "sealed": "已收笔", "stopped": "已停止",
    "withdrawn": "已撤回",
}  # fmt: skip

ALLOWED_PARENTS: dict[NodeKind, tuple[NodeKind, ...]] = {
    "user": ("greeting", "reply"),
    "reply": ("user",),
    "greeting": (),
}

JOB_STATE_ZH = {
    "pending": "还在排队",
    "retrying": "正在等待重试",
    "done": "已经完成",
}  # (a refused requeue, in Chinese)


class Node(NodeState, Aggregate):
    """A node's commands: each checks its rule and records an event (its state, and how each event
    changes it, is `NodeState`)."""

    @classmethod
    def place_greeting(cls, node_id: UUID, story_id: UUID, text: str, greeting_index: int) -> Node:
        return cls._create(GreetingPlaced, id=node_id, story_id=story_id, text=text, greeting_index=greeting_index)

    @classmethod
    def attach(cls, node_id: UUID, kind: NodeKind, parent: Node, text: str, said_at: datetime | None = None) -> Node:
        """A new user or reply node under `parent`, refusing turns that do not alternate. `said_at`: when
        it was said, when that was before now (an imported chat's date)."""
        if parent.kind not in ALLOWED_PARENTS[kind]:
            raise InvalidParentError(f"a {kind} node cannot follow a {parent.kind} node")
        if not text.strip():
            raise EmptyTextError(f"a {kind} node needs text")
        if parent.phase in ("writing", "waiting"):  # its seal (and its scribe job) would come after ours
            raise TurnStateError(f"the reply is still {parent.phase}: answer after it is sealed or stopped")
        event_class = UserSpoke if kind == "user" else ReplyPosted
        return cls._create(
            event_class,
            id=node_id,
            story_id=parent.story_id,
            parent_id=parent.id,
            text=text,
            depth=parent.depth + 1,
            turn=parent.turn + (1 if kind == "user" else 0),
            said_at=said_at,
        )

    @classmethod
    def open_reply(cls, node_id: UUID, parent: Node, model: str) -> Node:
        """An engine reply under a user node: an empty draft the main model writes through tools."""
        if parent.kind != "user":
            raise InvalidParentError(f"a reply cannot follow a {parent.kind} node")
        return cls._create(
            ReplyOpened,
            id=node_id,
            story_id=parent.story_id,
            parent_id=parent.id,
            depth=parent.depth + 1,
            turn=parent.turn,
            model=model,
        )

    # --- the draft (engine replies) -----------------------------------------------------------

    def _writable(self, version: int) -> None:
        if self.phase != "writing":
            raise DraftSealedError(
                f"the draft is {self.phase}; it cannot change", zh=f"稿件{PHASE_ZH[self.phase]}，不能再改"
            )
        if version != self.draft_version:
            raise DraftVersionConflictError(
                f"version conflict: you read version {version}, the draft is at version {self.draft_version}; "
                "nothing was changed — read the draft again",
                zh=f"版本冲突：你读到的是 v{version}，稿件现在是 v{self.draft_version}；什么都没有改——请重新读取稿件",
            )

    def write_draft(self, version: int, text: str, direct: bool = False) -> int:
        self._writable(version)
        self.trigger_event(DraftWritten, version=version + 1, text=text, direct=direct)
        return self.draft_version

    def append_draft(self, version: int, text: str, separator: str = APPEND_SEPARATOR, direct: bool = False) -> int:
        self._writable(version)
        self.trigger_event(
            DraftAppended, version=version + 1, text=text, separator=separator if self.text else "", direct=direct
        )
        return self.draft_version

    def edit_draft(self, version: int, edits: list[Edit]) -> int:
        self._writable(version)
        apply_edits(self.text, edits)  # refuses the whole batch before anything is recorded
        self.trigger_event(DraftEdited, version=version + 1, edits=[{"old": e.old, "new": e.new} for e in edits])
        return self.draft_version

    def read_draft(self, start: int | None, end: int | None) -> str:
        self.trigger_event(DraftRead, version=self.draft_version, start=start, end=end)
        return read_range(self.text, start, end)

    def search_draft(self, query: str, limit: int) -> list[tuple[int, str]]:
        hits = search(self.text, query, limit)
        self.trigger_event(DraftSearched, version=self.draft_version, query=query, hits=len(hits))
        return hits

    def seal(self, version: int) -> None:
        self._writable(version)
        if not self.text.strip():
            raise EmptyTextError(
                "an empty draft cannot be sealed: write the reply first", zh="空稿不能收笔：请先写回复"
            )
        self.trigger_event(ReplySealed, version=version)

    def refuse(self, tool: str, reason: str) -> None:
        self.trigger_event(DraftRefused, tool=tool, reason=reason)

    def ask_user(self, ask_id: str, question: str, options: list[str]) -> None:
        if self.phase != "writing":
            raise TurnStateError(f"the turn is {self.phase}; it cannot ask", zh=f"本拍{PHASE_ZH[self.phase]}，不能提问")
        self.trigger_event(TurnAsked, ask_id=ask_id, question=question, options=options)

    def answer(self, answer: str) -> TurnAsked:
        if self.phase != "waiting" or self.ask is None:
            raise TurnStateError("this reply is not waiting for an answer", field="node_id")
        ask = self.ask
        self.trigger_event(AskAnswered, ask_id=ask.ask_id, answer=answer)
        return ask

    def stop(self, reason: StopReason, detail: str = "") -> None:
        if self.phase in ("writing", "waiting"):
            self.trigger_event(TurnStopped, reason=reason, detail=detail)

    def note_previous_read(self, target_id: UUID, version: int) -> None:
        self.trigger_event(PreviousReplyRead, target_id=target_id, version=version)

    def note_memory_search(self, query: str, found: list[dict[str, str]]) -> None:
        if self.phase != "writing":
            raise TurnStateError(f"the turn is {self.phase}", zh=f"本拍{PHASE_ZH[self.phase]}")
        self.trigger_event(MemorySearched, query=query, found=found)

    def withdraw(self, target_id: UUID, reason: str) -> None:
        if self.phase != "writing" or self.draft_version:
            raise TurnStateError(
                "only a turn that has not written yet can turn into a revision",
                zh="只有还没动笔的一拍才能改为修订上一条回复",
            )
        self.trigger_event(ReplyWithdrawn, target_id=target_id, reason=reason)

    def record_call(
        self,
        purpose: CallPurpose,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: float,
        outcome: str,
    ) -> None:
        self.trigger_event(
            ModelCalled,
            purpose=purpose,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=round(latency_ms, 3),
            outcome=outcome,
        )

    # --- background work ----------------------------------------------------------------------

    def job_settled(self, kind: JobKind) -> bool:
        """Whether work of `kind` for this node has its final outcome (done, skipped or given up)."""
        return self.jobs.get(kind) in SETTLED

    def patch_scene(self, author: SceneAuthor, patch: dict[str, Any], warnings: list[str]) -> None:
        """Record a scene patch; the scribe's comes at most once per reply (a rerun changes nothing)."""
        if author == "scribe" and (self.kind != "reply" or self.job_settled("scribe")):
            raise TurnStateError(f"the scribe's work for this node is already {self.jobs.get('scribe', 'moot')}")
        self.trigger_event(ScenePatched, author=author, patch=patch, warnings=warnings)

    def fail_job(self, kind: JobKind, error: str, retry_at: datetime | None) -> int:
        """Record a failed attempt; returns its number."""
        if self.job_settled(kind):
            raise TurnStateError(f"the {kind} work for this node is already {self.jobs[kind]}")
        attempt = self.job_attempts.get(kind, 0) + 1
        self.trigger_event(SideJobFailed, kind=kind, attempt=attempt, error=error[:2000], retry_at=retry_at)
        return attempt

    def skip_job(self, kind: JobKind, reason: str) -> None:
        if self.job_settled(kind):
            raise TurnStateError(f"the {kind} work for this node is already {self.jobs[kind]}")
        self.trigger_event(SideJobSkipped, kind=kind, reason=reason)

    def retry_job(self, kind: JobKind) -> None:
        """Ask for work that settled without a result (failed for good, or skipped) to be done again."""
        state = self.jobs.get(kind)
        if state is None:
            raise JobNotFoundError(f"node {self.id} has no {kind} job", zh=f"节点 {self.id} 没有 {kind} 任务")
        if state not in REQUEUED_FROM:
            raise TurnStateError(
                f"only failed or skipped work can be done again; the {kind} work for this node is {state}",
                zh=f"只有失败或跳过的后台任务才能重做；这个节点的 {kind} 任务{JOB_STATE_ZH.get(state, state)}",
            )
        self.trigger_event(SideJobRequeued, kind=kind, was=state)

    def finish_job(self, kind: JobKind, detail: str) -> None:
        if self.job_settled(kind):
            raise TurnStateError(f"the {kind} work for this node is already {self.jobs[kind]}")
        self.trigger_event(SideJobDone, kind=kind, detail=detail)

    # --- compaction ---------------------------------------------------------------------------

    def announce_compaction(self, uncovered: int, reason: CompactionReason) -> None:
        self.trigger_event(CompactionDue, uncovered=uncovered, reason=reason)

    def summarize(
        self, episode_id: str, start_id: UUID, after_id: UUID | None, start_depth: int, first_turn: int,
        last_turn: int, text: str, anchors: list[UUID], author: SummaryAuthor,
    ) -> None:  # fmt: skip
        self.trigger_event(
            EpisodeSummarized, episode_id=episode_id, start_id=start_id, after_id=after_id,
            start_depth=start_depth, first_turn=first_turn, last_turn=last_turn, text=text, anchors=anchors,
            author=author,
        )  # fmt: skip

    def fold_digest(
        self, digest_id: str, previous_id: UUID | None, absorbed: list[str], last_turn: int,
        sections: dict[str, str], anchors: list[UUID], author: SummaryAuthor,
    ) -> None:  # fmt: skip
        self.trigger_event(
            DigestFolded, digest_id=digest_id, previous_id=previous_id, absorbed=absorbed, last_turn=last_turn,
            sections=sections, anchors=anchors, author=author,
        )  # fmt: skip

    def edit_summary(self, text: str | None, sections: dict[str, str] | None) -> None:
        if text is not None:
            if self.episode is None:
                raise SummaryError("this node carries no episode", field="node_id")
            if not text.strip():
                raise SummaryError("an episode needs text", field="text")
            self.trigger_event(SummaryEdited, summary_id=self.episode.episode_id, text=text, sections=None)
        elif sections is not None:
            if self.digest is None:
                raise SummaryError("this node carries no digest", field="node_id")
            unknown = sorted(set(sections) - set(DIGEST_SECTIONS))
            if unknown:
                raise SummaryError(
                    f"unknown section {unknown[0]}; sections: {', '.join(DIGEST_SECTIONS)}", field="sections"
                )
            self.trigger_event(SummaryEdited, summary_id=self.digest.digest_id, text=None, sections=sections)

    # --- annotations --------------------------------------------------------------------------

    def revise(self, text: str, reason: str) -> None:
        if self.kind == "user":
            raise NodeKindError("user words are edited by a sibling user node, not revised", field="node_id")
        if not text.strip():
            raise EmptyTextError("a revision needs text")
        if text != self.text:
            self.trigger_event(ReplyRevised, text=text, reason=reason)

    def star(self) -> None:
        if not self.starred:
            self.trigger_event(NodeStarred)

    def unstar(self) -> None:
        if self.starred:
            self.trigger_event(NodeUnstarred)

    def hide(self) -> None:
        if not self.hidden:
            self.trigger_event(NodeHidden)

    def note_client_part(self, client_part: str) -> None:
        """The proxied front end's own part of the request this reply answers (or that continued it): the
        blob `client_part` names (noted when it differs from the one noted last)."""
        if self.kind != "reply":
            raise NodeKindError("a front end's part of a request is noted on the reply", field="node_id")
        if client_part != self.client_part:
            self.trigger_event(ClientPartNoted, client_part=client_part)

    def note_search_terms(self, terms: str) -> None:
        """The side model's search of the story's memory for this node's words ("" for none it could use);
        terms once noted stay (a request retried, asked again meanwhile), and replace only a "" before them."""
        if self.kind != "user":
            raise NodeKindError("a search of the memory is noted on the user's words", field="node_id")
        if self.search_terms is None or (not self.search_terms and terms):
            self.trigger_event(SearchTermsNoted, terms=terms)

    def unhide(self) -> None:
        if self.hidden:
            self.trigger_event(NodeUnhidden)

    @property
    def view(self) -> NodeView:
        """An immutable copy of the current state, rebuilt only when the version changes."""
        if self._view is None or self._view.version != self.version:
            assert self.story_id is not None
            self._view = NodeView(
                id=self.id,
                story_id=self.story_id,
                parent_id=self.parent_id,
                kind=self.kind,
                depth=self.depth,
                turn=self.turn,
                text=self.text,
                hidden=self.hidden,
                starred=self.starred,
                revisions=self.revisions,
                phase=self.phase,
                draft_version=self.draft_version,
                version=self.version,
                created_at=self.said_at or self.created_on,
                episode=self.episode,
                digest=self.digest,
                client_part=self.client_part,
                search_terms=self.search_terms,
            )
        return self._view
