"""A proxied context within the client's budget, counted as the upstream gets it: every message its own
overhead, the client's system messages one by one, its blocks, its instructions after the chat and its
prefill — whatever the budget, however tightly the turns fill it."""

from __future__ import annotations

from domain.application import Changji
from projections.context.relayed import ClientPart
from projections.context.window import MESSAGE_OVERHEAD_TOKENS
from projections.read_models.store import ReadModels
from providers.tokens import EstimatingCounter
from service.views import StoryViews
from tests.builders import StoryBuilder

PART = ClientPart(
    fixed=("You are Mira, a ferry pilot.", "Mira's personality: dry, patient.", "Scenario: the last crossing."),
    blocks=("[Author's note: the fog thickens.]",),
    after=("Stay in character.",),
    prefill="Mira:",
)


def test_a_proxied_context_never_holds_more_tokens_than_its_budget(
    sqlite_changji: Changji, read_models: ReadModels
) -> None:
    counter = EstimatingCounter()
    views = StoryViews(sqlite_changji, read_models, counter, None)
    story = StoryBuilder.start(sqlite_changji, pack_turns=0)
    for i in range(40):
        story.turn(f"第{i}次问：雾里还能看见灯塔吗？", f"“第{i}次答：看得见，只是很淡。”她把舵往左打了半圈。")
    words = story.user("雾散了吗？")
    over = []
    for budget in range(120, 900, 3):
        context = views.relayed_context(story.tenant, story.story_id, words, PART, budget)
        sent = sum(counter.count(m.content) + MESSAGE_OVERHEAD_TOKENS for m in context.messages)
        if sent > budget:
            over.append((budget, sent))
    assert over == []
