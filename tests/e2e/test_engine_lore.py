"""Lore in engine mode, over HTTP, with the main model played by the fake server: `lorebook_search` answers
from the card's books (Chinese queries without spaces too) and refuses bad arguments; the context the model
gets names this turn's hits by title (the bring-your-own view gives them in full); `lorebook_write` records
into the card's supplement, once per content, linked to the reply that wrote it, in force only on that
reply's path (and in the card's other stories); the write gate holds entries until approved, unless the
user asked to record; the write and its reply are saved in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest

from api.keys import SERVICE
from domain.card.commands.lore import supplement_id
from domain.card.lorebook import Lorebook
from providers.fake_server import FakeModelServer, ToolCalls
from tests.builders import Api, a_card
from tests.fake_model import MakeEngine, calls, draft, messages_of, post_turn, seal, write

# --- cards ------------------------------------------------------------------------------------------

ENGLISH_CARD: dict[str, Any] = {
    "name": "Mira",
    "description": "{{char}} is a ranger who guards the valley roads.",
    "first_mes": "The campfire crackles. “{{user}}, you are late.”",
    "alternate_greetings": [],
    "character_book": {
        "name": "Valley lore",
        "entries": [
            {
                "id": 0, "keys": ["Eldwood"], "comment": "The Eldwood", "enabled": True, "insertion_order": 10,
                "content": "An old forest east of the river; its trees whisper at night.",
            },
            {
                "id": 1, "keys": ["Grey Tower", "watchtower"], "comment": "The Grey Tower", "enabled": True,
                "insertion_order": 20, "content": "A ruined watchtower where the wardens once kept the signal fire.",
            },
            {
                "id": 2, "keys": ["wyvern", "wyverns"], "comment": "Wyverns", "enabled": True, "insertion_order": 30,
                "content": "Winged beasts that nest on the northern cliffs; they fear smoke.",
            },
            {
                "id": 3, "keys": [], "comment": "The Pact", "constant": True, "enabled": True, "insertion_order": 0,
                "content": "Rangers never draw steel before the council of elders.",
            },
        ],
    },
}  # fmt: skip
TOWER = "A ruined watchtower where the wardens once kept the signal fire."
PACT = "Rangers never draw steel before the council of elders."

CHINESE_BOOK: dict[str, Any] = {
    "name": "北屿设定",
    "entries": [
        {
            "id": 0, "keys": ["怪兽"], "comment": "雾林怪兽", "enabled": True, "insertion_order": 10,
            "content": "雾林深处住着一头独眼怪兽，只在月圆之夜出没。",
        },
        {
            "id": 1, "keys": ["灯塔"], "comment": "北屿灯塔", "enabled": True, "insertion_order": 20,
            "content": "灯塔建于百年前，灯油每月由渡船运来。",
        },
        {
            "id": 2, "keys": ["盐田"], "comment": "南岸盐田", "enabled": True, "insertion_order": 30,
            "content": "南岸的盐田归村长家所有。",
        },
    ],
}  # fmt: skip
MONSTER = "雾林深处住着一头独眼怪兽，只在月圆之夜出没。"

ZHOU: dict[str, Any] = {"title": "渡船老周", "keys": ["老周"], "content": "老周是北屿渡船的船夫，左手少了两根手指。"}
ZHOU_WORDS = "老周今天会来码头吗？"


async def english_card(api: Api) -> str:
    return str((await api.card(**ENGLISH_CARD))["id"])


async def chinese_card(api: Api, **settings: Any) -> str:
    body = {"card": {**a_card().model_dump(), "character_book": CHINESE_BOOK}, "settings": settings}
    return str((await api.call("POST", "/v1/cards", body, 201))["id"])


@pytest.fixture
async def engine(make_engine: MakeEngine) -> Api:
    """Engine mode without an embedder: lore needs none, and loading one would only slow the file down."""
    return await make_engine(embedder="none")


# --- helpers ----------------------------------------------------------------------------------------


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in messages_of(request, "tool")]


def last_user(request: dict[str, Any]) -> str:
    return str(messages_of(request, "user")[-1]["content"])


def system_of(request: dict[str, Any]) -> str:
    return str(messages_of(request, "system")[0]["content"])


def results(turn: dict[str, Any], name: str) -> list[tuple[bool, str]]:
    return [(t["ok"], t["result"]) for t in turn["tools"] if t["name"] == name]


def everything(context: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in context["messages"])


def lore_block(context: dict[str, Any]) -> dict[str, Any] | None:
    return next((b for b in context["explain"] if b["what"] == "lore"), None)


async def context_at(api: Api, story_id: str, at: str | None = None) -> dict[str, Any]:
    query = f"?at={at}" if at else ""
    data: dict[str, Any] = await api.call("GET", f"/v1/stories/{story_id}/context{query}")
    return data


async def supplement(api: Api, card_id: str) -> dict[str, Any]:
    book_id = supplement_id(UUID(card_id))
    data: dict[str, Any] = await api.call("GET", f"/v1/cards/{card_id}/lorebooks/{book_id}")
    return data


async def lorebooks(api: Api, card_id: str) -> list[tuple[str, str, int]]:
    listed = await api.call("GET", f"/v1/cards/{card_id}/lorebooks")
    return [(b["id"], b["kind"], b["entries"]) for b in listed["items"]]


def written(fields: dict[str, Any], reply: str = "“船夫老周明天来。”") -> ToolCalls:
    """One round: the model records an entry, writes its reply and seals it."""
    return calls(("lorebook_write", fields), write(0, reply), seal(1))


async def write_zhou(
    fake: FakeModelServer, api: Api, story_id: str, words: str = "码头上那个人是谁？"
) -> dict[str, Any]:
    fake.script(written(ZHOU))
    turn = await post_turn(api, story_id, words)
    assert turn["outcome"] == "sealed"
    return turn


# --- 1. lorebook_search -----------------------------------------------------------------------------


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


# --- 2. lore in the context -------------------------------------------------------------------------


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
         "constant": False},
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


# --- 3. lorebook_write ------------------------------------------------------------------------------


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


# --- 4. the model's entries follow the path --------------------------------------------------------


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


# --- 5. the write gate -----------------------------------------------------------------------------


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


# --- 6. one transaction ----------------------------------------------------------------------------


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
