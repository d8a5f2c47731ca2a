"""Which passages recall finds: on the story's path, outside the window, hidden ones marked, revised ones as revised."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import pytest

from domain.application import Changji
from projections.context.records import Context
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from providers.embedders import HashingEmbedder
from providers.tokens import EstimatingCounter
from service.recall import Recall
from service.views import StoryViews
from tests.builders import StoryBuilder
from tests.compaction_support import SMALL, compact_if_due
from tests.integration.recall_support import FILLER, TIGHT, filler, indexed, recalled


@pytest.fixture
def recall(read_models: ReadModels) -> Recall:
    return Recall(read_models, HashingEmbedder())


@pytest.fixture
def views(sqlite_changji: Changji, read_models: ReadModels, recall: Recall) -> StoryViews:
    return StoryViews(sqlite_changji, read_models, EstimatingCounter(), recall)


def verbatim(ctx: Context) -> set[UUID]:
    return {n for b in ctx.explain if b.what == "verbatim" for n in b.node_ids}


def test_an_old_turn_comes_back_for_the_users_words_and_nothing_in_the_window(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    _, treasure = story.turn("地下室里有什么？", "“一箱旧银币，是守塔人的宝藏。”")
    filler(story, 20)
    story.turn("银币还在吗？", "“在，宝藏没动过。”")  # the same words, inside the window
    story.user("那箱银币宝藏现在在哪里？")
    indexed(runner, recall, story)
    ctx = views.context(story.tenant, story.story_id, None)
    block = next(b for b in ctx.explain if b.what == "recall")
    assert treasure in block.node_ids and block.scores and len(block.scores) == len(block.node_ids)
    assert not set(recalled(ctx)) & verbatim(ctx)
    last = ctx.messages[-1].content
    assert "【剧情记忆】" in last and "旧银币" in last and last.endswith("那箱银币宝藏现在在哪里？")
    assert block.message_index == block.end_message == len(ctx.messages) - 1 and block.span is not None
    shown = last[block.span[0] : block.span[1]]  # the block's own characters in that message
    assert shown.startswith("【剧情记忆】") and shown.rstrip().endswith("”") and len(shown) == block.chars
    words = next(b for b in ctx.explain if b.what == "user")
    assert words.span is not None and last[words.span[0] : words.span[1]] == "那箱银币宝藏现在在哪里？"


@pytest.mark.parametrize("question", ["潮汐表放在哪？", "那箱银币宝藏现在在哪里？"])
def test_the_share_the_recall_block_leaves_goes_back_to_the_window(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels, question: str
) -> None:
    """Nothing recalled: the context is the one without recall; a short block: the window takes the rest
    of the share back, turn by turn, and whatever it takes back in is not recalled as well."""
    words = Recall(read_models, None)  # (BM25 alone: only passages sharing the question's words)
    views = StoryViews(sqlite_changji, read_models, EstimatingCounter(), words)
    share = 400
    contexts, found = {}, None
    for k in (10, 0):
        story = StoryBuilder.start(
            sqlite_changji, **{**TIGHT, "recall_tokens": share, "recall_share": 0, "recall_k": k}
        )
        _, treasure = story.turn("地下室里有什么？", "“一箱旧银币，是守塔人的宝藏。”")
        filler(story, 20)
        story.user(question)
        indexed(runner, words, story)
        contexts[k] = views.context(story.tenant, story.story_id, None)
        found = found if k == 0 else treasure
    on, off = contexts[10], contexts[0]
    budget = on.budget
    assert on.tokens <= budget and off.tokens <= budget and off.cut_turns > 0
    block = next((b for b in on.explain if b.what == "recall"), None)
    if question.startswith("潮汐"):
        assert block is None and on.messages == off.messages and on.tokens == off.tokens
    else:
        assert block is not None and found in recalled(on) and block.tokens < share
        assert budget - on.tokens < share - block.tokens  # (the share's unused part: the window's again)
        assert on.cut_turns < off.cut_turns + 20 and not set(recalled(on)) & verbatim(on)


def test_an_abandoned_branch_is_never_recalled(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    user, abandoned = story.turn("地下室里有什么？", "“一箱旧银币宝藏。”")
    kept = story.reply("“只有几桶灯油。”", parent=user)  # a regenerate: the leaf moves to the sibling
    filler(story, 20)
    story.user("地下室的银币宝藏呢？")
    indexed(runner, recall, story)
    ctx = views.context(story.tenant, story.story_id, None)
    assert abandoned not in recalled(ctx)
    hits = views.recall_at(story.tenant, story.story_id, "银币宝藏", 10, None)
    assert str(abandoned) not in {h.row["node_id"] for h in hits}
    assert kept in {UUID(h.row["node_id"]) for h in views.recall_at(story.tenant, story.story_id, "灯油", 10, None)}


def test_a_hidden_turn_is_recalled_and_marked(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    _, secret = story.turn("你藏了什么？", "“一封没寄出的信。”")
    story.annotate(secret, "hide")
    filler(story, 20)
    story.user("那封没寄出的信呢？")
    indexed(runner, recall, story)
    ctx = views.context(story.tenant, story.story_id, None)
    assert secret in recalled(ctx) and "（已隐藏）" in ctx.messages[-1].content


def test_a_revised_reply_is_recalled_by_its_new_text_only(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    _, reply = story.turn("钥匙在哪？", "“在蓝色花瓶里。”")
    filler(story, 3)
    story.annotate(reply, "revise", "“在铁皮饼干盒里。”", "rewrite")
    indexed(runner, recall, story)
    new = views.recall_at(story.tenant, story.story_id, "铁皮饼干盒", 3, None)
    old = views.recall_at(story.tenant, story.story_id, "蓝色花瓶", 3, None)
    assert new and new[0].row["node_id"] == str(reply) and "饼干盒" in new[0].row["text"]
    assert all("花瓶" not in h.row["text"] for h in old)


def test_an_index_rebuilt_from_events_answers_as_the_live_one(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews, tmp_path: Path
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    for i in range(20):
        story.turn(f"第{i}天去了哪里？", f"“第{i}天去了{'码头' if i % 3 else '山顶的灯塔'}。”")
    indexed(runner, recall, story)
    fresh_store = ReadModels(tmp_path / "fresh.sqlite")
    ProjectionRunner(sqlite_changji, fresh_store).rebuild()
    fresh = StoryViews(sqlite_changji, fresh_store, EstimatingCounter(), Recall(fresh_store, HashingEmbedder()))
    assert fresh.recall is not None
    fresh.recall.refresh_soon(story.story_id).result(timeout=30)
    for query in ("山顶的灯塔", "码头", "第7天"):
        live = views.recall_at(story.tenant, story.story_id, query, 5, None)
        rebuilt = fresh.recall_at(story.tenant, story.story_id, query, 5, None)
        assert [(h.row, h.score) for h in live] == [(h.row, h.score) for h in rebuilt]


def test_a_deleted_storys_index_is_gone(sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall) -> None:
    story = StoryBuilder.start(sqlite_changji)
    story.turns(3)
    indexed(runner, recall, story)
    assert recall.index(story.story_id) is not None and recall.state(story.story_id).passages == 3
    sqlite_changji.stories.delete_story(story.tenant, story.story_id)
    indexed(runner, recall, story)
    assert recall.index(story.story_id) is None and recall.state(story.story_id).passages == 0


def test_a_long_reply_comes_back_whole_where_it_fits_and_as_its_part_where_it_does_not(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews
) -> None:
    tale = (
        "“那是很多年前的事了。" + "北屿的雾一连下了七天，渡船都停了，岛上的人只能靠存粮过日子。" * 85
        + "最后是守塔人划着小船，把药送到了南岸的诊所，那一夜灯塔的灯一直亮着。”"
    )  # fmt: skip
    assert len(tale) > 2500
    wide = {**TIGHT, "context_window": 9000, "recall_tokens": 4500}
    story = StoryBuilder.start(sqlite_changji, **wide)
    _, told = story.turn("讲讲灯塔那一夜的事。", tale)
    filler(story, 300)
    story.user("守塔人把药送到哪里了？")
    indexed(runner, recall, story)
    ctx = views.context(story.tenant, story.story_id, None)
    block = next(b for b in ctx.explain if b.what == "recall")
    assert told in block.node_ids
    last = ctx.messages[-1].content
    assert "那是很多年前的事了" in last and "南岸的诊所" in last  # its first part and its last: the whole reply
    assert "讲讲灯塔那一夜的事" in last

    story.app.stories.configure_story(story.tenant, story.story_id, {"recall_tokens": 300, "recall_share": 0}, None)
    ctx = views.context(story.tenant, story.story_id, None)
    last = ctx.messages[-1].content
    block = next(b for b in ctx.explain if b.what == "recall")
    assert told in block.node_ids and "南岸的诊所" in last and "…" in last  # the part that matched, marked
    assert "那是很多年前的事了" not in last


def hoarded(app: Changji, settings: dict[str, object], fillers: int) -> tuple[StoryBuilder, list[UUID]]:
    """A story of twelve turns that each hide a hoard, then `fillers` of filler, compacted as it goes, ending
    on the user asking where the hoards are; (the story, the hoards' replies)."""
    story = StoryBuilder.start(app, **settings)
    hoards = []
    for i in range(12):
        _, reply = story.turn(f"第{i}个箱子里有什么？", f"“第{i}箱旧银币，是守塔人埋下的宝藏之{i}。”")
        hoards.append(reply)
        compact_if_due(app, reply)
    for _ in range(fillers):
        _, reply = story.turn(*FILLER)
        compact_if_due(app, reply)
    story.user("那些银币宝藏都埋在哪里？")
    return story, hoards


def test_the_budget_the_window_leaves_unused_is_recall_s_too(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    """A window that stops where the summaries begin leaves part of the budget unused: recall takes it,
    past `recall_tokens`, and the context still fits; with the window able to fill it, recall keeps to
    its share."""
    words = Recall(read_models, None)
    views = StoryViews(sqlite_changji, read_models, EstimatingCounter(), words)
    share = 120
    roomy = {
        **SMALL, "context_window": 3000, "reply_reserve": 100, "recall_tokens": share, "recall_share": 0, "recall_k": 30,
        "fill_window": False,
    }  # fmt: skip
    story, hoards = hoarded(sqlite_changji, roomy, 6)
    indexed(runner, words, story)
    ctx = views.context(story.tenant, story.story_id, None)
    block = next(b for b in ctx.explain if b.what == "recall")
    assert ctx.tokens <= ctx.budget and block.tokens > share  # (the window stops at the summaries)
    assert len(set(block.node_ids) & set(hoards)) > 3 and "unused by the window" in block.why
    assert not set(recalled(ctx)) & verbatim(ctx)

    filling = {"fill_window": True, "pack_turns": 0, "context_window": 900}
    story = StoryBuilder.start(sqlite_changji, **{**roomy, **filling})
    for i in range(12):
        story.turn(f"第{i}个箱子里有什么？", f"“第{i}箱旧银币，是守塔人埋下的宝藏之{i}。”")
    filler(story, 30)
    story.user("那些银币宝藏都埋在哪里？")
    indexed(runner, words, story)
    ctx = views.context(story.tenant, story.story_id, None)
    block = next(b for b in ctx.explain if b.what == "recall")
    assert block.tokens <= share + 60 and ctx.tokens <= ctx.budget  # (a turn's worth left over at most)


def test_a_window_filled_with_unfolded_episodes_leaves_recall_what_the_next_episode_would_not_fit(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    words = Recall(read_models, None)
    views = StoryViews(sqlite_changji, read_models, EstimatingCounter(), words)
    share = 120
    settings = {
        **SMALL,
        "pack_turns": 8,
        "context_window": 1500,
        "reply_reserve": 100,
        "recall_tokens": share,
        "recall_share": 0,
    }
    story, _ = hoarded(sqlite_changji, settings, 60)
    indexed(runner, words, story)
    ctx = views.context(story.tenant, story.story_id, None)
    block = next(b for b in ctx.explain if b.what == "recall")
    assert any(b.what == "episode" for b in ctx.explain) and ctx.tokens <= ctx.budget
    assert block.tokens > share and "unused by the window" in block.why
    assert not set(recalled(ctx)) & verbatim(ctx)


def test_room_the_window_cannot_take_goes_to_recall_past_recall_k(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    """`recall_k` bounds the block within its share; what the window leaves that it cannot take (it stops
    where the summaries begin) is filled past it, from the passages recall found besides, within the
    budget."""
    words = Recall(read_models, None)
    views = StoryViews(sqlite_changji, read_models, EstimatingCounter(), words)
    settings = {**SMALL, "context_window": 3000, "reply_reserve": 100, "recall_k": 3, "fill_window": False}
    story, hoards = hoarded(sqlite_changji, settings, 6)
    indexed(runner, words, story)
    ctx = views.context(story.tenant, story.story_id, None)
    block = next(b for b in ctx.explain if b.what == "recall")
    assert len(set(block.node_ids) & set(hoards)) > 3 and ctx.tokens <= ctx.budget
    assert not set(recalled(ctx)) & verbatim(ctx)
