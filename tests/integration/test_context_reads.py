"""A read of the context never writes: a path that outgrew its budget is packed because of the reply
that made it so, decided on that write."""

from __future__ import annotations

from uuid import uuid4

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from providers.tokens import EstimatingCounter
from service.views import StoryViews
from service.writes import StoryWrites
from tests.builders import StoryBuilder

LONG = "风从北边来，灯塔的玻璃嗡嗡作响，沈砚把油灯挪到窗边，说渡船还要三天。" * 3


def test_an_over_budget_context_is_read_without_a_write_and_the_reply_announced_the_pack(
    sqlite_changji: Changji, read_models: ReadModels, runner: ProjectionRunner
) -> None:
    views = StoryViews(sqlite_changji, read_models, EstimatingCounter())
    writes = StoryWrites(sqlite_changji, views)
    story = StoryBuilder.start(sqlite_changji, keep_turns=2, pack_turns=0, context_window=1024, reply_reserve=0)
    for i in range(1, 13):
        story.user(f"第{i}问：{LONG}")
        if i < 12:
            story.reply(f"第{i}答：{LONG}")
    runner.catch_up()
    before = sqlite_changji.recorder.max_notification_id()
    ctx = views.context(story.tenant, story.story_id, None)
    assert ctx.cut_turns > 0 and sqlite_changji.recorder.max_notification_id() == before  # a read: no event
    appended = writes.append_node(story.tenant, story.story_id, uuid4(), "reply", f"第12答：{LONG}", None, None)
    reply = sqlite_changji.node_aggregate(appended.node.id)
    assert reply.jobs.get("compact") == "pending" and reply.compaction_reason == "budget"
    assert appended.position == sqlite_changji.recorder.max_notification_id()  # the answer waits for it
    user = writes.append_node(story.tenant, story.story_id, uuid4(), "user", "还有呢？", None, None)
    assert user.position == sqlite_changji.recorder.max_notification_id()  # user words decide nothing
