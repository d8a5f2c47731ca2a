"""The engine's context names this turn's lore hits by title, the bring-your-own view in full; `lore_bodies` decides."""

from __future__ import annotations

from providers.fake_server import FakeModelServer
from tests.builders import Api
from tests.e2e.engine_lore.lore_support import PACT, TOWER, context_at, english_card, last_user, lore_block, system_of
from tests.fake_model import calls, post_turn, seal, write


async def test_engine_context_names_hits_by_title_and_the_byo_view_gives_them_in_full(
    fake: FakeModelServer, engine: Api
) -> None:
    story = await engine.story(await english_card(engine))
    fake.script(calls(write(0, "“It still stands.”"), seal(1)))
    turn = await post_turn(engine, story["id"], "Is the Grey Tower still standing?")
    assert turn["outcome"] == "sealed"

    [request] = fake.requests
    words = last_user(request)
    assert "[Lore] Entries that came up this turn:\n- The Grey Tower\n" in words
    assert TOWER not in words  # engine mode: the title only, the model looks the text up
    assert "[Lore index] Other entries (look them up with lorebook_search when needed):\nThe Eldwood, Wyverns" in words
    assert words.endswith("Is the Grey Tower still standing?")
    assert PACT in system_of(request) and PACT not in words
    assert "The Pact" not in words  # a constant entry is not indexed: it is always there

    user_id = turn["reply"]["parent_id"]
    byo = await context_at(engine, story["id"], user_id)
    byo_words = byo["messages"][-1]["content"]
    assert byo["messages"][-1]["role"] == "user"
    assert f"[Lore] Entries that came up this turn:\n- The Grey Tower: {TOWER}\n" in byo_words
    assert PACT in byo["messages"][0]["content"]

    block = lore_block(byo)
    assert block is not None
    assert block["lore"] == [
        {"book_id": "embedded", "uid": 1, "title": "The Grey Tower", "key": "Grey Tower", "secondary": None,
         "constant": False, "left_out": None, "detail": None, "roll": None, "sticky": False},
    ]  # fmt: skip
    assert "'The Grey Tower' (key 'Grey Tower')" in block["why"]
    system = byo["explain"][0]
    assert system["what"] == "system"
    assert [(r["uid"], r["title"], r["key"], r["constant"]) for r in system["lore"]] == [(3, "The Pact", None, True)]


async def test_lore_bodies_setting_overrides_the_mode(fake: FakeModelServer, engine: Api) -> None:
    full = await engine.story(await english_card(engine), lore_bodies="full")
    fake.script(calls(write(0, "“Smoke keeps them off.”"), seal(1)))
    turn = await post_turn(engine, full["id"], "Any wyverns about?")
    assert turn["outcome"] == "sealed"
    assert "Winged beasts that nest on the northern cliffs" in last_user(fake.requests[0])

    titles = await engine.story(await english_card(engine), lore_bodies="titles")
    user = await engine.append(titles["id"], "user", "Any wyverns about?")
    words = (await context_at(engine, titles["id"], user["node"]["id"]))["messages"][-1]["content"]
    assert "- Wyverns\n" in words and "Winged beasts" not in words
