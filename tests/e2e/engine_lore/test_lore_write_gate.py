"""The write gate holds the model's entries until the user approves them, unless the user asked to record."""

from __future__ import annotations

from uuid import UUID

import pytest

from domain.card.commands.lore import supplement_id
from providers.fake_server import FakeModelServer
from tests.builders import Api
from tests.e2e.engine_lore.lore_support import (
    ZHOU,
    ZHOU_WORDS,
    chinese_card,
    context_at,
    everything,
    last_user,
    results,
    supplement,
    write_zhou,
)
from tests.fake_model import calls, post_turn, seal, write


@pytest.mark.parametrize("on", ["card", "story"])
async def test_the_write_gate_holds_an_entry_until_it_is_approved(fake: FakeModelServer, engine: Api, on: str) -> None:
    card_id = await chinese_card(engine, **({"lore_write_gate": True} if on == "card" else {}))
    sid = (await engine.story(card_id, **({"lore_write_gate": True} if on == "story" else {})))["id"]
    turn = await write_zhou(fake, engine, sid)
    assert results(turn, "lorebook_write") == [(True, "「渡船老周」已记下，等待用户确认后生效。")]
    [entry] = (await supplement(engine, card_id))["entries"]
    assert entry["pending"] is True

    fake.script(calls(("lorebook_search", {"query": "老周"})), calls(write(0, "“谁？”"), seal(1)))
    asked = await post_turn(engine, sid, ZHOU_WORDS)
    assert "渡船老周" not in last_user(fake.requests[-2])
    assert results(asked, "lorebook_search") == [(True, "设定集里没有与「老周」有关的条目。")]
    user_id = asked["reply"]["parent_id"]
    assert "渡船老周" not in everything(await context_at(engine, sid, user_id))
    searched = await engine.call("GET", f"/v1/cards/{card_id}/lore/search?q=老周")
    assert searched["items"] == []

    book_id = supplement_id(UUID(card_id))
    approved = await engine.call("POST", f"/v1/cards/{card_id}/lorebooks/{book_id}/entries/{entry['uid']}/approve")
    assert approved["pending"] is False and approved["written_at"] == entry["written_at"]
    assert ZHOU["content"] in everything(await context_at(engine, sid, user_id))
    fake.script(calls(write(0, "“他明早到。”"), seal(1)))
    await post_turn(engine, sid, ZHOU_WORDS)
    assert "- 渡船老周\n" in last_user(fake.requests[-1])


@pytest.mark.parametrize(
    "words",
    ["请把这个记下来：码头上有个船夫。", "Please note this down: there is a ferryman at the pier."],
)
async def test_the_write_gate_lets_through_what_the_user_asked_to_record(
    fake: FakeModelServer, engine: Api, words: str
) -> None:
    card_id = await chinese_card(engine, lore_write_gate=True)
    sid = (await engine.story(card_id))["id"]
    turn = await write_zhou(fake, engine, sid, words)
    assert results(turn, "lorebook_write") == [(True, "已记入补充设定集：「渡船老周」。")]
    [entry] = (await supplement(engine, card_id))["entries"]
    assert entry["pending"] is False
    asked = await engine.append(sid, "user", ZHOU_WORDS)
    assert ZHOU["content"] in everything(await context_at(engine, sid, asked["node"]["id"]))
