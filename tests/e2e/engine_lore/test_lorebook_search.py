"""`lorebook_search` answers from the card's books, Chinese words without spaces too, and refuses bad arguments."""

from __future__ import annotations

from providers.fake_server import FakeModelServer
from tests.builders import Api
from tests.e2e.engine_lore.lore_support import MONSTER, TOWER, ZHOU, chinese_card, english_card, results, tool_messages
from tests.fake_model import calls, draft, post_turn, seal, write


async def test_lorebook_search_answers_hits_nothing_and_refusals(fake: FakeModelServer, engine: Api) -> None:
    story = await engine.story(await english_card(engine))
    fake.script(
        calls(
            ("lorebook_search", {"query": "tower"}),
            ("lorebook_search", {"query": "dragons"}),
            ("lorebook_search", {"query": ""}),
            ("lorebook_search", {"query": "tower", "limit": 99}),
            ("lorebook_search", {"limit": 2}),
            ("lorebook_search", "{not json"),
            ("lorebook_search", {"query": 7}),
        ),
        calls(write(0, "“The tower still stands.”"), seal(1)),
    )
    turn = await post_turn(engine, story["id"], "What do you know about the old ruins?")
    assert turn["outcome"] == "sealed" and turn["reply"]["text"] == "“The tower still stands.”"
    searched = results(turn, "lorebook_search")
    assert [ok for ok, _ in searched] == [True, True, False, False, False, False, False]

    shown = tool_messages(fake.requests[1])
    assert shown == [text for _, text in searched]  # what the model read is what the turn reports
    found, nothing, *refused = shown
    assert found.startswith("Lorebook entries about “tower” (1):")
    assert f"[The Grey Tower] {TOWER}" in found and "Eldwood" not in found
    assert nothing == "Nothing in the lorebooks about “dragons”."
    assert all(text.startswith("Not done:") for text in refused)
    assert "`query`" in refused[0] and "`limit`" in refused[1]

    refusals = (await draft(engine, turn["reply"]["id"]))["refusals"]
    assert len(refusals) == 5


async def test_lorebook_search_finds_a_chinese_entry_from_words_without_spaces(
    fake: FakeModelServer, engine: Api
) -> None:
    story = await engine.story(await chinese_card(engine))
    fake.script(
        calls(("lorebook_search", {"query": "森林里的怪兽", "limit": 1}), ("lorebook_search", {"query": "火山"})),
        calls(write(0, "“雾林里确实有东西。”"), seal(1)),
    )
    turn = await post_turn(engine, story["id"], "你听说过什么传闻吗？")
    assert turn["outcome"] == "sealed"
    found, nothing = tool_messages(fake.requests[1])
    assert found == f"设定集中与「森林里的怪兽」有关的条目（1 条）：\n【雾林怪兽】{MONSTER}"
    assert nothing == "设定集里没有与「火山」有关的条目。"


async def test_a_lorebook_search_after_a_write_in_the_same_turn_finds_it(fake: FakeModelServer, engine: Api) -> None:
    story = await engine.story(await chinese_card(engine))
    fake.script(
        calls(("lorebook_write", ZHOU)),
        calls(("lorebook_search", {"query": "老周"})),
        calls(write(0, "“老周来了。”"), seal(1)),
    )
    turn = await post_turn(engine, story["id"], "码头上那个人是谁？")
    assert turn["outcome"] == "sealed"
    [(ok, found)] = results(turn, "lorebook_search")
    assert ok and f"【渡船老周】{ZHOU['content']}" in found
