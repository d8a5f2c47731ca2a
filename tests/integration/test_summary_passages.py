"""Episode summaries as passages of the archive: each one archived with the turns it covers, replaced by
the user's edit, rebuilt from events as it was; recalled only when the context does not hold it already,
labelled with its turns, where the story turns that on (off by default)."""

from __future__ import annotations

from uuid import UUID

from domain.application import Changji
from domain.values import Episode, StorySettings
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from providers.embedders import HashingEmbedder
from providers.tokens import EstimatingCounter
from service.recall import Recall
from service.views import StoryViews
from tests.builders import StoryBuilder
from tests.compaction_support import SMALL, compact_if_due

FILLER = (
    "今天也在修灯塔的窗户，玻璃上全是盐霜，擦了一遍又一遍还是看不清外面的海。",
    "“窗框又松了，风一吹就响，明天得找几颗新钉子来，顺便把门轴也上点油。”",
)
SETTINGS = {
    **SMALL, "context_window": 900, "reply_reserve": 100, "recall_tokens": 300, "recall_share": 0, "fill_window": False,
    "recall_summaries": True,
}  # fmt: skip


def played(app: Changji, turns: int) -> StoryBuilder:
    """A story whose first turn hides a silver hoard, then `turns` of filler, compacted as it goes."""
    story = StoryBuilder.start(app, **SETTINGS)
    story.turn("地下室里有什么？", "“一箱旧银币宝藏，是守塔人留下的。”")
    for _ in range(turns):
        _, reply = story.turn(*FILLER)
        compact_if_due(app, reply)
    return story


def episodes(app: Changji, story: StoryBuilder) -> dict[str, Episode]:
    """Every episode on the story's path, by the node it annotates."""
    out, node = {}, app.node(app.story(story.tenant, story.story_id).leaf_id)
    while True:
        if node.episode is not None:
            out[str(node.id)] = node.episode
        if node.parent_id is None:
            return out
        node = app.node(node.parent_id)


def summary_rows(store: ReadModels, story: StoryBuilder) -> list[dict[str, object]]:
    return [row for row in store.passages(story.story_id) if row["kind"] == "episode"]


def test_each_episode_is_archived_with_the_turns_it_covers_and_edited_by_the_user(
    sqlite_changji: Changji, runner: ProjectionRunner
) -> None:
    story = played(sqlite_changji, 8)
    runner.catch_up()
    made = episodes(sqlite_changji, story)
    rows = summary_rows(runner.store, story)
    assert made and {row["node_id"] for row in rows} == set(made)
    for row in rows:
        episode = made[str(row["node_id"])]
        assert (row["first_turn"], row["turn"], row["user_id"]) == (
            episode.first_turn, episode.last_turn, str(episode.start_id)
        )  # fmt: skip
        assert str(row["text"]) in episode.text and row["user_part"] == 0
    edited = next(iter(made))
    sqlite_changji.compaction.edit_summary(story.tenant, UUID(edited), "守塔人把银币埋在了礁石下。", None)
    runner.catch_up()
    now = [row for row in summary_rows(runner.store, story) if row["node_id"] == edited]
    assert [row["text"] for row in now] == ["守塔人把银币埋在了礁石下。"]
    assert now[0]["first_turn"] == made[edited].first_turn

    live = runner.store.passages(story.story_id)
    runner.store.drop()
    ProjectionRunner(sqlite_changji, ReadModels(runner.store.path)).catch_up()
    rebuilt = ReadModels(runner.store.path).passages(story.story_id)
    assert sorted(rebuilt, key=lambda r: str(r["id"])) == sorted(live, key=lambda r: str(r["id"]))


def test_an_episode_is_recalled_when_the_context_does_not_hold_it(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    recall = Recall(read_models, HashingEmbedder())
    story = played(sqlite_changji, 12)
    runner.catch_up()
    recall.refresh_soon(story.story_id).result(timeout=30)
    made = episodes(sqlite_changji, story)
    hoard = next(node for node, episode in made.items() if episode.first_turn <= 1 <= episode.last_turn)
    assert "银币宝藏" in made[hoard].text
    label = f"第{made[hoard].first_turn}–{made[hoard].last_turn}轮（摘要）"

    def found(shown: frozenset[str] | None) -> list[str]:
        hits = recall.search(story.story_id, "守塔人的银币宝藏", 10, 10_000, lambda _node: True, shown)
        return [hit.row["node_id"] for hit in hits if hit.episode]

    assert hoard in found(frozenset())
    assert hoard not in found(frozenset({hoard}))
    assert found(None) == []

    views = StoryViews(sqlite_changji, read_models, EstimatingCounter(), recall)
    story.user("守塔人的银币宝藏后来呢？")
    runner.catch_up()
    ctx = views.context(story.tenant, story.story_id, None)
    shown = {str(n) for b in ctx.explain if b.what == "episode" for n in b.node_ids}
    assert hoard not in shown  # folded into the digest: only recall can bring its words back
    block = next(b for b in ctx.explain if b.what == "recall")
    assert label in ctx.messages[-1].content
    assert UUID(hoard) in block.node_ids

    sqlite_changji.stories.configure_story(story.tenant, story.story_id, {"recall_summaries": False}, None)
    ctx = views.context(story.tenant, story.story_id, None)
    assert "（摘要）" not in ctx.messages[-1].content
    assert StorySettings().recall_summaries is False  # the default: turns only


def test_a_summarized_story_unfolds_into_the_share_nothing_recalled_took(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    """With the window filling its budget (the default), a recall that finds nothing leaves the context
    as it is without recall: the episodes shown word for word again take the share back."""
    words = Recall(read_models, None)  # (BM25 alone: nothing shares the question's words)
    views = StoryViews(sqlite_changji, read_models, EstimatingCounter(), words)
    contexts = {}
    for k in (10, 0):
        story = StoryBuilder.start(sqlite_changji, **{**SETTINGS, "fill_window": True, "recall_k": k})
        story.turn("地下室里有什么？", "“一箱旧银币宝藏，是守塔人留下的。”")
        for _ in range(30):
            _, reply = story.turn(*FILLER)
            compact_if_due(sqlite_changji, reply)
        story.user("潮汐表放在哪？")
        runner.catch_up()
        words.refresh_soon(story.story_id).result(timeout=30)
        contexts[k] = views.context(story.tenant, story.story_id, None)
    on, off = contexts[10], contexts[0]
    assert any(b.what in ("episode", "digest") for b in off.explain)  # (summarized, and not all unfolded)
    assert not any(b.what == "recall" for b in on.explain)
    assert on.messages == off.messages and on.tokens == off.tokens <= on.budget
