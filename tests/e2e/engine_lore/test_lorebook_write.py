"""`lorebook_write` records into the card's supplement once per content, never constant, saved with its reply."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest

from api.keys import SERVICE
from domain.card.commands.lore import supplement_id
from domain.card.lorebook import Lorebook
from providers.fake_server import FakeModelServer
from tests.builders import Api
from tests.e2e.engine_lore.lore_support import (
    ZHOU,
    ZHOU_WORDS,
    chinese_card,
    context_at,
    english_card,
    everything,
    last_user,
    lore_block,
    results,
    supplement,
    system_of,
    tool_messages,
    write_zhou,
    written,
)
from tests.fake_model import calls, draft, post_turn, seal, write


async def lorebooks(api: Api, card_id: str) -> list[tuple[str, str, int]]:
    listed = await api.call("GET", f"/v1/cards/{card_id}/lorebooks")
    return [(b["id"], b["kind"], b["entries"]) for b in listed["items"]]


async def test_lorebook_write_records_into_the_supplement_and_the_next_turn_sees_it(
    fake: FakeModelServer, engine: Api
) -> None:
    card_id = await chinese_card(engine)
    story = await engine.story(card_id)
    turn = await write_zhou(fake, engine, story["id"])
    reply_id = turn["reply"]["id"]
    assert results(turn, "lorebook_write") == [(True, "已记入补充设定集：「渡船老周」。")]
    assert tool_messages(fake.requests[0]) == []  # one round: written, drafted and sealed together

    book_id = str(supplement_id(UUID(card_id)))
    assert await lorebooks(engine, card_id) == [("embedded", "embedded", 3), (book_id, "supplement", 1)]
    book = await supplement(engine, card_id)
    [entry] = book["entries"]
    assert (entry["uid"], entry["title"], entry["keys"], entry["content"]) == (
        9000, ZHOU["title"], ZHOU["keys"], ZHOU["content"]
    )  # fmt: skip
    assert (entry["constant"], entry["pending"]) == (False, False)
    assert entry["written_at"] == {"story_id": story["id"], "node_id": reply_id}

    fake.script(calls(write(0, "“他明早到。”"), seal(1)))
    second = await post_turn(engine, story["id"], ZHOU_WORDS)
    assert second["outcome"] == "sealed"
    words = last_user(fake.requests[1])
    assert "- 渡船老周\n" in words and ZHOU["content"] not in words
    byo = await context_at(engine, story["id"], second["reply"]["parent_id"])
    assert ZHOU["content"] in byo["messages"][-1]["content"]
    block = lore_block(byo)
    assert block is not None
    assert [(r["book_id"], r["uid"], r["key"]) for r in block["lore"]] == [(book_id, 9000, "老周")]

    searched = await engine.call("GET", f"/v1/cards/{card_id}/lore/search?q=老周")
    assert [(h["book_id"], h["entry"]["title"]) for h in searched["items"]] == [(book_id, "渡船老周")]


async def test_lorebook_write_twice_and_bad_arguments_are_answered_and_the_turn_completes(
    fake: FakeModelServer, engine: Api
) -> None:
    card_id = await chinese_card(engine)
    story = await engine.story(card_id)
    await write_zhou(fake, engine, story["id"])

    again = {**ZHOU, "title": "船夫老周", "keys": ["船夫"], "content": f"  {ZHOU['content']}\n"}
    fake.script(
        calls(
            ("lorebook_write", again),
            ("lorebook_write", {"title": "阿青", "content": "阿青是村长的女儿。"}),
            ("lorebook_write", {"title": "阿青", "keys": ["阿青"], "content": "   "}),
            ("lorebook_write", {"title": "阿青", "keys": "阿青", "content": "阿青是村长的女儿。"}),
            ("lorebook_write", {"title": "阿青", "keys": ["阿青", " "], "content": "阿青是村长的女儿。"}),
            ("lorebook_write", {"title": "", "keys": ["阿青"], "content": "阿青是村长的女儿。"}),
            ("lorebook_write", "{oops"),
        ),
        calls(write(0, "“嗯。”"), seal(1)),
    )
    turn = await post_turn(engine, story["id"], "还有谁住在岛上？")
    assert turn["outcome"] == "sealed" and turn["reply"]["text"] == "“嗯。”"
    outcomes = results(turn, "lorebook_write")
    assert outcomes[0] == (True, "补充设定集里已有相同内容的条目「渡船老周」，未重复记录。")
    assert [ok for ok, _ in outcomes[1:]] == [False] * 6
    assert all(text.startswith("未执行：") for _, text in outcomes[1:])
    assert "`keys`" in outcomes[1][1] and "`content`" in outcomes[2][1] and "`keys`" in outcomes[3][1]
    assert "`title`" in outcomes[5][1]
    assert tool_messages(fake.requests[-1]) == [text for _, text in outcomes]

    [entry] = (await supplement(engine, card_id))["entries"]
    assert entry["title"] == "渡船老周"
    assert len((await draft(engine, turn["reply"]["id"]))["refusals"]) == 6


async def test_two_writes_in_the_round_that_makes_the_supplement_are_both_recorded(
    fake: FakeModelServer, engine: Api
) -> None:
    card_id = await chinese_card(engine)
    story = await engine.story(card_id)
    qing = {"title": "阿青", "keys": ["阿青"], "content": "阿青是村长的女儿，会修渔网。"}
    fake.script(calls(("lorebook_write", ZHOU), ("lorebook_write", qing), write(0, "“都记住了。”"), seal(1)))
    turn = await post_turn(engine, story["id"], "码头上有两个人。")
    assert turn["outcome"] == "sealed"
    assert [ok for ok, _ in results(turn, "lorebook_write")] == [True, True]
    assert [e["title"] for e in (await supplement(engine, card_id))["entries"]] == ["渡船老周", "阿青"]


async def test_more_writes_in_one_round_into_an_existing_supplement(fake: FakeModelServer, engine: Api) -> None:
    card_id = await chinese_card(engine)
    sid = (await engine.story(card_id))["id"]
    await write_zhou(fake, engine, sid)
    qing = {"title": "阿青", "keys": ["阿青"], "content": "阿青是村长的女儿，会修渔网。"}
    hai = {"title": "阿海", "keys": ["阿海"], "content": "阿海是灯塔的学徒。"}
    fake.script(
        calls(("lorebook_write", qing), ("lorebook_write", hai), ("lorebook_write", {**hai, "title": "学徒"})),
        calls(write(0, "“都记住了。”"), seal(1)),
    )
    turn = await post_turn(engine, sid, "码头上还有两个人。")
    assert [text for _, text in results(turn, "lorebook_write")] == [
        "已记入补充设定集：「阿青」。",
        "已记入补充设定集：「阿海」。",
        "补充设定集里已有相同内容的条目「阿海」，未重复记录。",  # a duplicate within the round, too
    ]
    entries = (await supplement(engine, card_id))["entries"]
    assert [(e["uid"], e["title"]) for e in entries] == [(9000, "渡船老周"), (9001, "阿青"), (9002, "阿海")]
    assert {e["written_at"]["node_id"] for e in entries[1:]} == {turn["reply"]["id"]}


async def test_the_models_entries_are_never_constant_so_the_system_prompt_stays_as_it_was(
    fake: FakeModelServer, engine: Api
) -> None:
    card_id = await english_card(engine)
    sid = (await engine.story(card_id))["id"]
    oath: dict[str, Any] = {
        "title": "The Oath",
        "keys": ["oath"],
        "content": "Mira swore to guard the ford.",
        "constant": True,
    }
    fake.script(written(oath, "“I swear it.”"))
    turn = await post_turn(engine, sid, "Swear you will guard the ford.")
    system_before = system_of(fake.requests[0])
    assert results(turn, "lorebook_write") == [(True, "Recorded in the supplementary lorebook: “The Oath”.")]
    [entry] = (await supplement(engine, card_id))["entries"]
    assert entry["constant"] is False

    fake.script(calls(write(0, "“Then we ride.”"), seal(1)))
    await post_turn(engine, sid, "Shall we go?")
    request = fake.requests[-1]
    assert system_of(request) == system_before and oath["content"] not in system_of(request)
    assert "The Oath" in last_user(request)  # in the index, by title


async def test_a_written_entry_switched_off_or_removed_leaves_the_context(fake: FakeModelServer, engine: Api) -> None:
    card_id = await chinese_card(engine)
    sid = (await engine.story(card_id))["id"]
    await write_zhou(fake, engine, sid)
    user_id = (await engine.append(sid, "user", ZHOU_WORDS))["node"]["id"]
    entries = f"/v1/cards/{card_id}/lorebooks/{supplement_id(UUID(card_id))}/entries/9000"

    off = await engine.call("PATCH", entries, {"enabled": False})
    assert off["enabled"] is False and off["written_at"] is not None
    assert "渡船老周" not in everything(await context_at(engine, sid, user_id))
    await engine.call("PATCH", entries, {"enabled": True})
    assert ZHOU["content"] in everything(await context_at(engine, sid, user_id))
    await engine.call("DELETE", entries, status=204)
    assert "渡船老周" not in everything(await context_at(engine, sid, user_id))
    assert (await supplement(engine, card_id))["entries"] == []


async def test_a_write_and_its_reply_are_saved_together_or_not_at_all(
    fake: FakeModelServer, engine: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    card_id = await chinese_card(engine)
    sid = (await engine.story(card_id))["id"]
    app = engine.client.app[SERVICE].app
    record = app._record_aggregates
    failed: list[int] = []

    def failing_once(aggregates: Sequence[Any]) -> Any:
        if not failed and any(isinstance(a, Lorebook) for a in aggregates):
            failed.append(len(aggregates))
            raise OSError("the disk is full")
        return record(aggregates)

    monkeypatch.setattr(app, "_record_aggregates", failing_once)
    fake.script(written(ZHOU))
    broken = await post_turn(engine, sid, "码头上那个人是谁？")
    assert failed == [3]  # the reply, the new supplement and the card that attaches it: one save
    assert broken["outcome"] == "error"
    history = await draft(engine, broken["reply"]["id"])
    assert (history["phase"], history["text"], history["versions"]) == ("stopped", "", [])
    assert await lorebooks(engine, card_id) == [("embedded", "embedded", 3)]
    card = await engine.call("GET", f"/v1/cards/{card_id}")
    assert card["lorebooks"] == []

    again = await write_zhou(fake, engine, sid)  # nothing half-made is left behind: the next write works
    assert results(again, "lorebook_write") == [(True, "已记入补充设定集：「渡船老周」。")]
    [entry] = (await supplement(engine, card_id))["entries"]
    assert entry["written_at"] == {"story_id": sid, "node_id": again["reply"]["id"]}
