"""Edge cases: the scribe queue cannot deadlock behind a draft, job rows fold the same however the log
is cut into batches, a retrying compaction is not re-announced, automatic packs keep min_pack_chars,
and summaries far above a budget cut are still replayed."""

from __future__ import annotations

import asyncio
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest

from domain.errors import TurnStateError
from projections.read_models.store import ReadModels
from schedulers.workers.compaction import CompactWorker, Inline
from tests.builders import StoryBuilder, memory_app
from tests.compaction_support import SMALL, compact


def test_no_user_words_under_a_reply_still_being_written() -> None:
    story = StoryBuilder.start(memory_app())
    user = story.user("你好。")
    app = story.app
    reply_id = uuid4()
    app.turns.reopen_turn(story.tenant, story.story_id, reply_id, user, "m")
    with pytest.raises(TurnStateError, match="still writing"):
        story.user("抢答。", reply_id)


def _jobs_after(app: object, batches: int) -> list[dict[str, object]]:
    events = [(n.id, app.mapper.to_domain_event(n)) for n in app.recorder.select_notifications(start=1, limit=10_000)]  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        store = ReadModels(Path(tmp) / "r.sqlite")
        size = max(1, len(events) // batches)
        for start in range(0, len(events), size):
            store.apply(events[start : start + size])
        return store.dump()["jobs"]


def test_job_rows_fold_the_same_in_one_batch_or_event_by_event() -> None:
    app = memory_app()
    story = StoryBuilder.start(app, **SMALL)
    story.turns(5)
    reply = story.leaf
    app.jobs.finish_job(reply, "compact", "nothing due")
    app.compaction.schedule_compaction(reply, "budget")  # announced again after it settled
    app.jobs.record_job_failure(reply, "compact", "http 500", datetime(2030, 1, 1, tzinfo=UTC), None)
    one = _jobs_after(app, 1)
    assert one == _jobs_after(app, 10_000)
    row = next(r for r in one if r["id"] == f"compact:{reply}")
    assert (row["status"], row["attempts"]) == ("retrying", 1)


def test_a_retrying_compaction_is_not_announced_again() -> None:
    app = memory_app()
    story = StoryBuilder.start(app, **SMALL)
    story.turns(5)
    app.jobs.record_job_failure(story.leaf, "compact", "http 500", datetime(2030, 1, 1, tzinfo=UTC), None)
    assert app.compaction.schedule_compaction(story.leaf, "budget") == 0
    assert app.node_aggregate(story.leaf).job_attempts["compact"] == 1


def test_an_automatic_pack_keeps_min_pack_chars() -> None:
    app = memory_app()
    story = StoryBuilder.start(app, keep_turns=2, pack_turns=3, min_pack_chars=5000)
    story.turns(5)
    assert app.node_aggregate(story.leaf).jobs.get("compact") == "pending"  # announced by the turn count …
    done = asyncio.run(CompactWorker(app, Inline(), None).compact(story.leaf, False, None)).detail  # … but too short
    assert done == "nothing due" and app.node(story.leaf).episode is None


def test_summaries_far_above_a_budget_cut_are_still_replayed() -> None:
    story = StoryBuilder.start(memory_app(), keep_turns=2, pack_turns=0, context_window=900, reply_reserve=0)
    story.turns(8, user="第{i}问" + "雨" * 60, reply="第{i}答" + "风" * 60)
    assert compact(story.app, story.leaf, manual=True).startswith("episode of turns 0–6")
    story.turns(60, user="后来第{i}问" + "雨" * 30, reply="后来第{i}答" + "风" * 30)
    ctx = story.context()
    kinds = [b.what for b in ctx.explain]
    assert "cut" in kinds and ("digest" in kinds or "episode" in kinds)
    cut = next(b for b in ctx.explain if b.what == "cut")
    summary = next(b for b in ctx.explain if b.what in ("digest", "episode"))
    assert summary.covers is not None and cut.covers is not None and cut.covers[0] == summary.covers[1] + 1


def test_cut_turns_counts_the_turns_between_the_summaries_and_the_window() -> None:
    story = StoryBuilder.start(memory_app(), keep_turns=2, pack_turns=0, context_window=900, reply_reserve=0)
    story.turns(8, user="第{i}问" + "雨" * 60, reply="第{i}答" + "风" * 60)
    compact(story.app, story.leaf, manual=True)
    story.turns(60, user="后来第{i}问" + "雨" * 30, reply="后来第{i}答" + "风" * 30)
    ctx = story.context()
    cut = next(b for b in ctx.explain if b.what == "cut")
    assert cut.covers is not None and ctx.cut_nodes == cut.covers[1] - cut.covers[0] + 1
    assert ctx.cut_turns == ctx.cut_nodes // 2 > 0  # each cut turn is a user node and its reply
