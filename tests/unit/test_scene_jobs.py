"""Scene and job rules outside the read models: the node's job outcomes, retry backoff, the scribe's
request, and the scene's place and budget in the assembled context."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from domain.application import Changji
from domain.errors import TurnStateError
from domain.tree.rules.paths import walk_up
from domain.tree.rules.scene import Roster, SceneSnapshot, apply_patch
from projections.context.assemble import assemble_context
from projections.context.records import Context
from projections.context.window import RenderCache, WindowCache
from projections.read_models.scenes import SceneAt
from providers.tokens import EstimatingCounter
from schedulers.system import JobPolicy
from schedulers.workers.scribe import scribe_messages
from tests.builders import StoryBuilder


def test_only_a_reply_takes_a_scribe_patch_and_only_once(story: StoryBuilder) -> None:
    user, reply = story.turn()
    with pytest.raises(TurnStateError):
        story.app.scenes.record_scribe_patch(user, {"time": "夜"}, [], None)
    assert story.app.scenes.record_scribe_patch(reply, {"time": "夜"}, [], None).recorded
    assert not story.app.scenes.record_scribe_patch(reply, {"time": "昼"}, [], None).recorded
    view = story.app.scenes.record_scene_edit(
        story.tenant, story.story_id, user, {"time": "昼"}, []
    ).value  # the user edits any node
    assert view.id == user


def test_failed_attempts_count_up_until_one_gives_up(story: StoryBuilder) -> None:
    _, reply = story.turn()
    later = datetime(2030, 1, 1, tzinfo=UTC)
    assert [story.app.jobs.record_job_failure(reply, "scribe", "500", later, None).attempt for _ in range(3)] == [
        1,
        2,
        3,
    ]
    final = story.app.jobs.record_job_failure(reply, "scribe", "500", None, None)
    assert final.recorded and final.attempt == 4
    assert not story.app.jobs.record_job_skip(reply, "scribe", "too late").recorded
    assert story.app.node_aggregate(reply).jobs == {"scribe": "failed"}


def test_backoff_doubles_with_jitter_and_gives_up_at_the_last_attempt() -> None:
    policy = JobPolicy(retry_seconds=2.0, retry_cap_seconds=10.0, max_attempts=4)
    now = datetime(2030, 1, 1, tzinfo=UTC)
    delays = [(policy.retry_at(n, now) - now).total_seconds() for n in (1, 2, 3)]  # type: ignore[operator]
    assert 1.0 <= delays[0] <= 2.0 and 2.0 <= delays[1] <= 4.0 and 4.0 <= delays[2] <= 8.0
    assert policy.retry_at(4, now) is None
    capped = JobPolicy(retry_seconds=2.0, retry_cap_seconds=10.0, max_attempts=50).retry_at(20, now)
    assert capped is not None and capped - now <= timedelta(seconds=10)


def test_the_scribe_request_carries_the_ledger_the_turn_and_the_known_names() -> None:
    snapshot = apply_patch(SceneSnapshot(), Roster(), {"location": "灯塔", "characters": {"老周": {}}}).snapshot
    system, user = scribe_messages(snapshot, ["沈砚", "User", "老周", "沈砚"], "沈砚", "User", "你好。", "嗯。")
    assert "沈砚、User、老周" in system["content"] and "{" not in system["content"].split("JSON 对象：")[0]
    for field in ("time", "location", "characters", "affinity", "inventory", "flags", "plot_threads"):
        assert field in system["content"]
    ledger = json.loads(user["content"].split("【当前账本】\n", 1)[1].split("\n\n【本轮对话】", 1)[0])
    assert ledger["location"] == "灯塔" and list(ledger["characters"]) == ["老周"]
    assert user["content"].endswith("【本轮对话】\nUser：你好。\n\n沈砚：嗯。")
    english = scribe_messages(snapshot, ["Ann"], "Ann", "Bo", "Hi.", "Hello.", "en")
    assert "[LEDGER]" in english[1]["content"] and english[1]["content"].endswith("Bo: Hi.\n\nAnn: Hello.")


def _scene(story: StoryBuilder, size: int) -> SceneAt:
    patch = {"location": "灯塔", "plot_threads": ["风" * size]}
    result = apply_patch(SceneSnapshot(), Roster(), patch)
    return SceneAt(str(story.root_id), result.snapshot, result.roster, 1)


def test_the_scene_comes_before_the_instructions_and_the_users_words(story: StoryBuilder) -> None:
    story.turn("你好。", "嗯。")
    story.user("油够吗？")
    model = story.app.story(story.tenant, story.story_id)
    card = story.app.card_of(model).data.model_copy(update={"post_history_instructions": "保持克制。"})
    renders = RenderCache(EstimatingCounter())
    upward = walk_up(story.app.node, story.leaf)
    ctx = assemble_context(card, story.app.settings(model), upward, renders, scene=_scene(story, 4))
    last = ctx.messages[-1].content
    assert (
        last.index("【世界状态】")
        < last.index("【登场名录】")
        < last.index("【卡作者末端指令】")
        < last.index("油够吗？")
    )
    assert [b.what for b in ctx.explain][-4:] == ["scene", "roster", "instructions", "user"]
    assert ctx.tokens == sum(b.tokens for b in ctx.explain)
    at_reply = assemble_context(
        card,
        story.app.settings(model),
        walk_up(story.app.node, story.app.node(story.leaf).parent_id),
        renders,
        scene=_scene(story, 4),
    )  # type: ignore[arg-type]
    assert "【世界状态】" not in at_reply.messages[-1].content  # no user words to put it before


def test_a_large_scene_is_paid_for_by_the_oldest_turns_and_cached_windows_stay_exact(app: Changji) -> None:
    story = StoryBuilder.start(app, context_window=900, reply_reserve=100)
    story.turns(30, user="第{i}问" + "雨" * 20, reply="第{i}答" + "风" * 20)
    story.user("最后一问")
    model = story.app.story(story.tenant, story.story_id)
    card, settings = story.app.card_of(model).data, story.app.settings(model)
    windows, renders = WindowCache(), RenderCache(EstimatingCounter())

    def assembled(scene: SceneAt | None, windows: WindowCache | None = windows) -> Context:
        return assemble_context(card, settings, walk_up(story.app.node, story.leaf), renders, windows, scene=scene)

    plain, big = assembled(None), _scene(story, 300)
    with_scene = assembled(big)
    assert with_scene == assembled(big, windows=None)  # the cached window, trimmed, equals a full walk
    assert with_scene.tokens <= with_scene.budget and with_scene.cut_turns > plain.cut_turns
    assert assembled(None) == plain  # the trim did not leak into the cached window
