"""Events → read-model row changes, folded in memory for a whole batch (pure; no database here).

A batch collects inserts, per-row column updates (last value wins) and counter increments, so the
store can write thousands of events with a handful of statements.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, get_type_hints
from uuid import UUID

from domain.card.events import CardCreated, CardDeleted, CardImported, CardMerged, CardUpdated
from domain.tree.events import (
    GreetingPlaced,
    LeafMoved,
    NodeHidden,
    NodeStarred,
    NodeUnhidden,
    NodeUnstarred,
    ReplyPosted,
    ReplyRevised,
    SavePointDeleted,
    SavePointMarked,
    StoryDeleted,
    StoryMovedToCard,
    StoryRestored,
    StoryRetitled,
    StoryStarted,
    UserSpoke,
)
from domain.tree.jobs import made_due, results_of
from domain.tree.rules.drafting import Edit, apply_edits
from domain.tree.rules.reconcile import link, said
from domain.tree.turn_events import (
    AskAnswered,
    ClientPartNoted,
    DraftAppended,
    DraftEdited,
    DraftWritten,
    ModelCalled,
    ReplyOpened,
    ReplySealed,
    ReplyWithdrawn,
    TurnAsked,
    TurnStopped,
)
from domain.tree.work_events import (
    EpisodeSummarized,
    ScenePatched,
    SideJobDone,
    SideJobFailed,
    SideJobRequeued,
    SideJobSkipped,
    SummaryEdited,
)
from domain.values import JobKind, JobState
from projections.read_models.archive import ArchiveChanges, Summary, Turn, episode_passages, turn_passages
from projections.read_models.memory_rows import MemoryRows

Row = dict[str, Any]


def _ts(when: datetime) -> str:
    return when.isoformat()


def job_time(when: datetime) -> str:
    """UTC with microseconds always written, so job times compare correctly as text."""
    return when.astimezone(UTC).isoformat(timespec="microseconds")


class RowChanges(MemoryRows):
    """What one batch of events does to the tables. `lookup(node_id)` gives (story id, text) of a node
    folded in an earlier batch, `node_lookup(node_id)` its `nodes` row."""

    def __init__(
        self,
        lookup: Callable[[str], tuple[str, str]],
        node_lookup: Callable[[str], Row],
        children_lookup: Callable[[str], list[str]] = lambda node_id: [],
    ) -> None:
        self.lookup, self.node_lookup, self.children_lookup = lookup, node_lookup, children_lookup
        self.node_rows: dict[str, Row] = {}  # nodes inserted in this batch
        self.children: dict[str, set[str]] = {}  # ... by their parent
        self.archive = ArchiveChanges.empty()
        self.inserts: defaultdict[str, list[Row]] = defaultdict(list)
        self.updates: defaultdict[str, defaultdict[str, Row]] = defaultdict(lambda: defaultdict(dict))
        self.increments: defaultdict[str, defaultdict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
        self.texts: dict[str, Row] = {}
        self.scene_patches: list[tuple[int, ScenePatched]] = []
        self.job_rows: dict[str, Row] = {}  # job rows made in this batch, by key, in their final state
        self.jobs_requeued: Counter[str] = Counter()  # settled jobs made due again in this batch, per kind

    def _update(self, table: str, key: UUID | str, **columns: Any) -> None:
        self.updates[table][str(key)].update(columns)

    def _increment(self, table: str, key: UUID | str, column: str, by: int = 1) -> None:
        self.increments[table][str(key)][column] += by

    def _text(self, node_id: str, story_id: str, text: str, seq: int) -> None:
        """A node's text as of `seq` (the full-text index picks it up from there: `ReadModels.index_texts`),
        and the links a proxied chat is found by: the node's own, and its children's when it had some."""
        self.texts[node_id] = {"node_id": node_id, "story_id": story_id, "text": text, "seq": seq}
        self._link(node_id)
        children = self.children.get(node_id, set())
        if node_id not in self.node_rows:  # (a node made in this batch has no children folded before it)
            children = children | set(self.children_lookup(node_id))
        for child in children:
            self._link(child)

    def _said(self, node_id: str) -> bytes:
        kind = self._node_now(node_id)["kind"]
        return said("user" if kind == "user" else "assistant", self._current(node_id)[1])

    def _link(self, node_id: str) -> None:
        """A node's `link`: the digest of its message after its parent's (`domain/tree/rules/reconcile.py`)."""
        parent = self._node_now(node_id)["parent_id"]
        linked = link(self._said(parent) if parent else None, self._said(node_id))
        if node_id in self.node_rows:
            self.node_rows[node_id]["link"] = linked
        else:
            self._update("nodes", node_id, link=linked)

    def fold(self, event: Any, seq: int) -> None:
        """Fold one event; events no read model cares about pass through. A job row is made or settled
        as `domain.tree.jobs` declares, after the tables the event changes."""
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event, seq)
        for rule in made_due(event):
            node_id = str(event.originator_id)
            if isinstance(event, SideJobRequeued):
                self._requeue_job(rule.kind, node_id, event, rule.detail(event))
            else:
                self._job(rule.kind, node_id, self._current(node_id)[0], event, seq, rule.detail(event))
        for kind in results_of(event):
            self._settle_job(kind, event, "done", "")

    def _on_card_created(self, e: CardCreated, seq: int) -> None:
        self._card_row(e, e.tenant_id, e.data, seq)

    def _on_card_imported(self, e: CardImported, seq: int) -> None:
        self._card_row(e, e.tenant_id, e.data, seq)

    def _card_row(self, e: Any, tenant_id: str, data: dict[str, Any], seq: int) -> None:
        self.inserts["cards"].append(
            {
                "id": str(e.originator_id), "tenant_id": tenant_id, "name": data["name"],
                "tags": json.dumps(data.get("tags", []), ensure_ascii=False), "deleted": 0,
                "created_at": _ts(e.timestamp), "updated_at": _ts(e.timestamp), "seq": seq,
            }
        )  # fmt: skip

    def _on_card_updated(self, e: CardUpdated, seq: int) -> None:
        tags = json.dumps(e.data.get("tags", []), ensure_ascii=False)
        self._update("cards", e.originator_id, name=e.data["name"], tags=tags, updated_at=_ts(e.timestamp))

    def _on_card_deleted(self, e: CardDeleted, seq: int) -> None:
        self._update("cards", e.originator_id, deleted=1, updated_at=_ts(e.timestamp))

    def _on_card_merged(self, e: CardMerged, seq: int) -> None:
        self._update("cards", e.originator_id, deleted=1, updated_at=_ts(e.timestamp))

    def _on_client_part_noted(self, e: ClientPartNoted, seq: int) -> None:
        """A reply that answered a front end through the proxy: its story is that front end's chat."""
        self._update("stories", self._current(str(e.originator_id))[0], relayed=1)

    def _on_story_moved_to_card(self, e: StoryMovedToCard, seq: int) -> None:
        self._update("stories", e.originator_id, card_id=str(e.card_id), updated_at=_ts(e.timestamp))

    def _on_story_started(self, e: StoryStarted, seq: int) -> None:
        self.inserts["stories"].append(
            {
                "id": str(e.originator_id), "tenant_id": e.tenant_id, "card_id": str(e.card_id),
                "title": e.title, "root_id": str(e.root_id), "leaf_id": str(e.root_id), "nodes": 0,
                "saves": 0, "summaries": 0, "deleted": 0, "relayed": 0, "created_at": _ts(e.timestamp),
                "updated_at": _ts(e.timestamp),
                "seq": seq,
            }
        )  # fmt: skip

    def _on_leaf_moved(self, e: LeafMoved, seq: int) -> None:
        self._update("stories", e.originator_id, leaf_id=str(e.node_id), updated_at=_ts(e.timestamp))

    def _on_story_retitled(self, e: StoryRetitled, seq: int) -> None:
        self._update("stories", e.originator_id, title=e.title, updated_at=_ts(e.timestamp))

    def _on_save_point_marked(self, e: SavePointMarked, seq: int) -> None:
        self._increment("stories", e.originator_id, "saves")

    def _on_save_point_deleted(self, e: SavePointDeleted, seq: int) -> None:
        self._increment("stories", e.originator_id, "saves", -1)

    def _on_story_deleted(self, e: StoryDeleted, seq: int) -> None:
        self._update("stories", e.originator_id, deleted=1, updated_at=_ts(e.timestamp))

    def _on_story_restored(self, e: StoryRestored, seq: int) -> None:
        self._update("stories", e.originator_id, deleted=0, updated_at=_ts(e.timestamp))

    def _node(
        self, e: Any, kind: str, parent: UUID | None, depth: int, turn: int, seq: int, text: str, phase: str = "final"
    ) -> None:
        node_id, story_id = str(e.originator_id), str(e.story_id)
        self.inserts["nodes"].append(
            {
                "id": node_id, "story_id": story_id, "parent_id": str(parent) if parent else None,
                "kind": kind, "depth": depth, "turn": turn, "hidden": 0, "starred": 0, "revisions": 0,
                "chars": len(text), "phase": phase, "created_at": _ts(getattr(e, "said_at", None) or e.timestamp),
                "seq": seq, "scene_at": None, "link": None,
            }
        )  # fmt: skip
        self.node_rows[node_id] = self.inserts["nodes"][-1]
        if parent is not None:
            self.children.setdefault(str(parent), set()).add(node_id)
        self._text(node_id, story_id, text, seq)
        self._increment("stories", story_id, "nodes")

    def _current(self, node_id: str) -> tuple[str, str]:
        row = self.texts.get(node_id)
        return (row["story_id"], row["text"]) if row else self.lookup(node_id)

    def _redraft(self, e: Any, text: str, seq: int) -> None:
        node_id = str(e.originator_id)
        story_id, _ = self._current(node_id)
        self._update("nodes", node_id, chars=len(text))
        self._text(node_id, story_id, text, seq)

    def _on_reply_opened(self, e: ReplyOpened, seq: int) -> None:
        self._node(e, "reply", e.parent_id, e.depth, e.turn, seq, "", "writing")

    def _on_draft_written(self, e: DraftWritten, seq: int) -> None:
        self._redraft(e, e.text, seq)

    def _on_draft_appended(self, e: DraftAppended, seq: int) -> None:
        self._redraft(e, self._current(str(e.originator_id))[1] + e.separator + e.text, seq)

    def _on_draft_edited(self, e: DraftEdited, seq: int) -> None:
        edits = [Edit(x["old"], x["new"]) for x in e.edits]
        self._redraft(e, apply_edits(self._current(str(e.originator_id))[1], edits), seq)

    def _on_reply_sealed(self, e: ReplySealed, seq: int) -> None:
        self._update("nodes", e.originator_id, phase="sealed")
        self._archive(str(e.originator_id), seq)
        self._touch(e)

    def _touch(self, e: Any) -> None:
        """The story of a node whose words changed (sealed, stopped, revised, hidden) was updated then."""
        self._update("stories", self._current(str(e.originator_id))[0], updated_at=_ts(e.timestamp))

    def _on_turn_asked(self, e: TurnAsked, seq: int) -> None:
        self._update("nodes", e.originator_id, phase="waiting")

    def _on_ask_answered(self, e: AskAnswered, seq: int) -> None:
        self._update("nodes", e.originator_id, phase="writing")

    def _on_turn_stopped(self, e: TurnStopped, seq: int) -> None:
        self._update("nodes", e.originator_id, phase="stopped")
        self._touch(e)

    def _on_reply_withdrawn(self, e: ReplyWithdrawn, seq: int) -> None:
        self._update("nodes", e.originator_id, phase="withdrawn")

    def _on_model_called(self, e: ModelCalled, seq: int) -> None:
        node_id = str(e.originator_id)
        self.inserts["model_calls"].append(
            {
                "seq": seq, "node_id": node_id, "story_id": self._current(node_id)[0], "purpose": e.purpose,
                "model": e.model, "prompt_tokens": e.prompt_tokens, "completion_tokens": e.completion_tokens,
                "latency_ms": e.latency_ms, "outcome": e.outcome, "at": _ts(e.timestamp),
            }
        )  # fmt: skip

    def _on_greeting_placed(self, e: GreetingPlaced, seq: int) -> None:
        self._node(e, "greeting", None, 0, 0, seq, e.text)

    def _on_user_spoke(self, e: UserSpoke, seq: int) -> None:
        self._node(e, "user", e.parent_id, e.depth, e.turn, seq, e.text)

    def _on_reply_posted(self, e: ReplyPosted, seq: int) -> None:
        self._node(e, "reply", e.parent_id, e.depth, e.turn, seq, e.text)
        self._archive(str(e.originator_id), seq)

    # --- the archive: a finished turn's passages, keyed by its reply -------------------------------

    def _node_now(self, node_id: str) -> Row:
        """A node's row as this batch has left it so far."""
        row = self.node_rows.get(node_id) or self.node_lookup(node_id)
        changed = self.updates["nodes"].get(node_id)
        return {**row, **changed} if changed else row

    def _archive(self, reply_id: str, seq: int) -> None:
        reply = self._node_now(reply_id)
        user = self._node_now(reply["parent_id"])
        story_id, reply_text = self._current(reply_id)
        turn = Turn(
            story_id, user["id"], reply_id, self._current(user["id"])[1], reply_text, reply["depth"], reply["turn"],
            bool(user["hidden"]), bool(reply["hidden"]),
        )  # fmt: skip
        self.archive.replaced[reply_id] = turn_passages(turn, seq)

    def _flag(self, e: Any, hidden: int, seq: int) -> None:
        node_id = str(e.originator_id)
        kind = self._node_now(node_id)["kind"]
        if kind != "greeting":
            self.archive.flags.append(("reply_hidden" if kind == "reply" else "user_hidden", node_id, hidden, seq))

    # --- background work: a job row per (kind, node), due from the event that made it due ----------

    def _job(self, kind: JobKind, node_id: str, story_id: str, e: Any, seq: int, detail: str) -> None:
        """A job row, due now. Rows made in this batch are kept by key and settled in place, so a batch
        folds them in event order wherever the log was cut into batches."""
        at, key = job_time(e.timestamp), f"{kind}:{node_id}"
        self.updates["jobs"].pop(key, None)  # a settle earlier in this batch is superseded by the new row
        self.job_rows[key] = {
            "id": key, "kind": kind, "node_id": node_id, "story_id": story_id, "status": "pending",
            "attempts": 0, "detail": detail, "next_at": at, "created_at": at, "updated_at": at, "seq": seq,
        }  # fmt: skip

    def _requeue_job(self, kind: JobKind, node_id: str, e: SideJobRequeued, detail: str) -> None:
        """A settled job due again in place: its row keeps its order (`seq`) and when it was first made due,
        so the scribe's jobs of a path still run in path order however they are retried."""
        at, key = job_time(e.timestamp), f"{kind}:{node_id}"
        columns = {"status": "pending", "attempts": 0, "detail": detail, "next_at": at, "updated_at": at}
        row = self.job_rows.get(key)
        if row is not None:
            row.update(columns)
        else:
            self.updates["jobs"][key].update(columns)
        self.jobs_requeued[kind] += 1

    def _on_episode_summarized(self, e: EpisodeSummarized, seq: int) -> None:
        node_id = str(e.originator_id)
        story_id = self._current(node_id)[0]
        self._increment("stories", story_id, "summaries")
        summary = Summary(
            story_id, e.episode_id, node_id, str(e.start_id), self._node_now(node_id)["depth"], e.first_turn,
            e.last_turn, e.text,
        )  # fmt: skip
        self.archive.episodes[node_id] = episode_passages(summary, seq)
        self.archive.edited.pop(node_id, None)

    def _on_summary_edited(self, e: SummaryEdited, seq: int) -> None:
        if e.text is None:  # a digest's sections: the digest is always in the context, never a passage
            return
        node_id = str(e.originator_id)
        rows = self.archive.episodes.get(node_id)
        if rows:  # summarized in this batch: edit the rows made
            first = rows[0]
            summary = Summary(
                first["story_id"], first["id"].rsplit(":", 1)[0], node_id, first["user_id"], first["depth"],
                first["first_turn"], first["turn"], e.text,
            )  # fmt: skip
            self.archive.episodes[node_id] = episode_passages(summary, seq)
        else:
            self.archive.edited[node_id] = (e.text, seq)

    def _on_side_job_done(self, e: SideJobDone, seq: int) -> None:
        self._settle_job(e.kind, e, "done", e.detail)

    def _on_scene_patched(self, e: ScenePatched, seq: int) -> None:
        self.scene_patches.append((seq, e))

    def _on_side_job_failed(self, e: SideJobFailed, seq: int) -> None:
        status: JobState = "failed" if e.retry_at is None else "retrying"
        next_at = job_time(e.retry_at) if e.retry_at is not None else None
        self._settle_job(e.kind, e, status, e.error, attempts=e.attempt, next_at=next_at)

    def _on_side_job_skipped(self, e: SideJobSkipped, seq: int) -> None:
        self._settle_job(e.kind, e, "skipped", e.reason)

    def _settle_job(self, kind: JobKind, e: Any, status: JobState, detail: str, **more: Any) -> None:
        if status != "retrying":
            more["next_at"] = None
        key = f"{kind}:{e.originator_id}"
        columns = {"status": status, "detail": detail, "updated_at": job_time(e.timestamp), **more}
        row = self.job_rows.get(key)
        if row is not None:
            row.update(columns)
        else:
            self._update("jobs", key, **columns)

    def _on_reply_revised(self, e: ReplyRevised, seq: int) -> None:
        node_id = str(e.originator_id)
        story_id, _ = self._current(node_id)
        self._update("nodes", node_id, chars=len(e.text))
        self._increment("nodes", node_id, "revisions")
        self._text(node_id, story_id, e.text, seq)
        if self._node_now(node_id)["kind"] == "reply":  # only finished replies are revised
            self._archive(node_id, seq)
        self._touch(e)

    def _on_node_starred(self, e: NodeStarred, seq: int) -> None:
        self._update("nodes", e.originator_id, starred=1)

    def _on_node_unstarred(self, e: NodeUnstarred, seq: int) -> None:
        self._update("nodes", e.originator_id, starred=0)

    def _on_node_hidden(self, e: NodeHidden, seq: int) -> None:
        self._update("nodes", e.originator_id, hidden=1)
        self._flag(e, 1, seq)
        self._touch(e)

    def _on_node_unhidden(self, e: NodeUnhidden, seq: int) -> None:
        self._update("nodes", e.originator_id, hidden=0)
        self._flag(e, 0, seq)
        self._touch(e)


def _handlers() -> dict[type, Callable[[RowChanges, Any, int], None]]:
    """Each `_on_<event>` method, keyed by the event class its `e` parameter is annotated with."""
    return {
        get_type_hints(fn)["e"]: fn
        for klass in RowChanges.__mro__
        for name, fn in vars(klass).items()
        if name.startswith("_on_")
    }


_HANDLERS = _handlers()
