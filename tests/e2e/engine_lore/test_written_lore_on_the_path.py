"""A written entry is in force where the reply that wrote it is on the path, in this story and the card's others."""

from __future__ import annotations

from uuid import UUID

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
    lore_block,
    results,
    supplement,
    write_zhou,
    written,
)
from tests.fake_model import calls, post_turn, seal, write


async def test_an_entry_holds_where_the_reply_that_wrote_it_is_on_the_path_here_and_in_the_cards_other_stories(
    fake: FakeModelServer, engine: Api
) -> None:
    card_id = await chinese_card(engine)
    story = await engine.story(card_id)
    sid = story["id"]
    first = await write_zhou(fake, engine, sid)
    r1, u1 = first["reply"]["id"], first["reply"]["parent_id"]
    below_r1 = (await engine.append(sid, "user", ZHOU_WORDS, r1))["node"]["id"]
    assert ZHOU["content"] in everything(await context_at(engine, sid, below_r1))

    fake.script(calls(write(0, "“那是个过路的商人。”"), seal(1)))
    regenerated = await engine.call("POST", f"/v1/stories/{sid}/regenerate", {"user_id": u1}, 201)
    r2 = regenerated["reply"]["id"]
    assert regenerated["outcome"] == "sealed" and regenerated["reply"]["parent_id"] == u1 and r2 != r1
    assert "渡船老周" not in everything({"messages": fake.requests[-1]["messages"]})

    fake.script(
        calls(("lorebook_search", {"query": "老周"})),
        calls(write(0, "“谁？”"), seal(1)),
    )
    on_r2 = await post_turn(engine, sid, ZHOU_WORDS)
    assert on_r2["reply"]["parent_id"] != below_r1
    assert "渡船老周" not in last_user(fake.requests[-2])  # neither a hit nor in the index
    assert results(on_r2, "lorebook_search") == [(True, "设定集里没有与「老周」有关的条目。")]
    below_r2 = on_r2["reply"]["parent_id"]
    byo_r2 = await context_at(engine, sid, below_r2)
    assert "渡船老周" not in everything(byo_r2) and "老周是北屿渡船的船夫" not in everything(byo_r2)
    assert all(r["book_id"] != str(supplement_id(UUID(card_id))) for r in (lore_block(byo_r2) or {"lore": []})["lore"])

    back = await context_at(engine, sid, below_r1)  # back on R1's path, after a context on R2's
    assert ZHOU["content"] in back["messages"][-1]["content"]
    assert "渡船老周" not in everything(await context_at(engine, sid, below_r2))

    # the card's world: another story knows the person while the reply that wrote it is on its story's current path
    other = await engine.story(card_id)
    asked = (await engine.append(other["id"], "user", ZHOU_WORDS))["node"]["id"]
    assert ZHOU["content"] not in everything(await context_at(engine, other["id"], asked))  # the story went R2's way
    await engine.call("POST", f"/v1/stories/{sid}/checkout", {"node_id": below_r1})
    assert ZHOU["content"] in (await context_at(engine, other["id"], asked))["messages"][-1]["content"]
    await engine.call("DELETE", f"/v1/stories/{sid}", status=204)  # a deleted story takes its entries back
    assert ZHOU["content"] not in everything(await context_at(engine, other["id"], asked))


async def test_a_regenerated_reply_recording_the_same_entry_again_has_it_on_its_path(
    fake: FakeModelServer, engine: Api
) -> None:
    card_id = await chinese_card(engine)
    sid = (await engine.story(card_id))["id"]
    first = await write_zhou(fake, engine, sid)
    fake.script(written(ZHOU, "“是老周，他明早开船。”"))
    regenerated = await engine.call(
        "POST", f"/v1/stories/{sid}/regenerate", {"user_id": first["reply"]["parent_id"]}, 201
    )
    r2 = regenerated["reply"]["id"]
    below_r2 = (await engine.append(sid, "user", ZHOU_WORDS, r2))["node"]["id"]
    assert ZHOU["content"] in everything(await context_at(engine, sid, below_r2))


async def test_what_another_story_wrote_on_a_branch_it_left_is_written_again_here(
    fake: FakeModelServer, engine: Api
) -> None:
    card_id = await chinese_card(engine)
    first = (await engine.story(card_id))["id"]
    written_there = await write_zhou(fake, engine, first)
    fake.script(calls(write(0, "“那是个过路的商人。”"), seal(1)))  # the first story goes another way
    await engine.call("POST", f"/v1/stories/{first}/regenerate", {"user_id": written_there["reply"]["parent_id"]}, 201)
    second = (await engine.story(card_id))["id"]
    turn = await write_zhou(fake, engine, second)
    assert results(turn, "lorebook_write") == [(True, "已记入补充设定集：「渡船老周」。")]
    entries = (await supplement(engine, card_id))["entries"]
    assert [e["written_at"]["story_id"] for e in entries] == [first, second]
    asked = (await engine.append(second, "user", ZHOU_WORDS, turn["reply"]["id"]))["node"]["id"]
    assert ZHOU["content"] in (await context_at(engine, second, asked))["messages"][-1]["content"]
