"""A card's lorebooks over HTTP: World Info files attached and detached, entries changed one by one (each
change an event the next context follows), constant entries in the system prompt, the title index under
its budget, and the lore search the model's `lorebook_search` uses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from domain.card.rules.lore import draw
from tests.builders import Api
from tests.scene_support import settled
from tests.shared_data import cards_dir

pytestmark = pytest.mark.both_stores


def world_info(entries: list[dict[str, Any]], **book: Any) -> bytes:
    return json.dumps({"entries": {str(i): {"uid": i, **e} for i, e in enumerate(entries)}, **book}).encode()


async def context_at_words(api: Api, card_id: str, words: str) -> dict[str, Any]:
    story = await api.call("POST", "/v1/stories", {"card_id": card_id}, 201)
    await api.append(story["id"], "user", words)
    context: dict[str, Any] = await api.call("GET", f"/v1/stories/{story['id']}/context")
    return context


def lore_refs(context: dict[str, Any], what: str = "lore") -> list[dict[str, Any]]:
    return next((b["lore"] for b in context["explain"] if b["what"] == what), [])


async def test_an_attached_world_info_file_fires_and_detaching_it_stops_it(api: Api) -> None:
    card = await api.card(name="Mira", description="A ferry pilot.", first_mes="The ferry waits.")
    entries = [{"key": ["lighthouse"], "content": "The lighthouse has been dark for a year.", "comment": "Lighthouse"}]
    book = await api.send("POST", f"/v1/cards/{card['id']}/lorebooks?name=Coast", world_info(entries))
    assert book["name"] == "Coast" and book["kind"] == "world_info" and len(book["entries"]) == 1
    listed = await api.call("GET", f"/v1/cards/{card['id']}/lorebooks")
    assert [item["id"] for item in listed["items"]] == [book["id"]]
    context = await context_at_words(api, card["id"], "Row us to the lighthouse.")
    assert [(r["book_id"], r["title"], r["key"]) for r in lore_refs(context)] == [
        (book["id"], "Lighthouse", "lighthouse")
    ]
    await api.call("DELETE", f"/v1/cards/{card['id']}/lorebooks/{book['id']}", status=204)
    assert (await api.call("GET", f"/v1/cards/{card['id']}/lorebooks"))["items"] == []
    context = await context_at_words(api, card["id"], "Row us to the lighthouse.")
    assert lore_refs(context) == []
    await api.call("GET", f"/v1/cards/{card['id']}/lorebooks/{book['id']}", status=404)


async def test_entry_changes_are_followed_by_the_next_context(api: Api) -> None:
    card = await api.card(name="Mira", description="A ferry pilot.", first_mes="The ferry waits.")
    entries = [
        {"key": ["reef"], "content": "The reef tears hulls.", "comment": "Reef"},
        {"key": ["gull"], "content": "Gulls steal bait.", "comment": "Gulls"},
    ]
    book = await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", world_info(entries))
    entry = f"/v1/cards/{card['id']}/lorebooks/{book['id']}/entries"
    words = "Mind the reef, and the gull on the mast."
    assert {r["title"] for r in lore_refs(await context_at_words(api, card["id"], words))} == {"Reef", "Gulls"}
    switched = await api.call("PATCH", f"{entry}/0", {"enabled": False})
    assert switched["enabled"] is False
    assert {r["title"] for r in lore_refs(await context_at_words(api, card["id"], words))} == {"Gulls"}
    await api.call("PATCH", f"{entry}/0", {"enabled": True, "keys": ["shoal"]})
    refs = lore_refs(await context_at_words(api, card["id"], "The shoal is close."))
    assert [(r["title"], r["key"]) for r in refs] == [("Reef", "shoal")]
    added = await api.call("POST", entry, {"keys": ["fog"], "content": "Fog rolls in at dusk.", "title": "Fog"}, 201)
    assert added["uid"] == 2
    await api.call("DELETE", f"{entry}/1", status=204)
    refs = lore_refs(await context_at_words(api, card["id"], "Fog and a gull."))
    assert [r["title"] for r in refs] == ["Fog"]
    shown = await api.call("GET", f"/v1/cards/{card['id']}/lorebooks/{book['id']}")
    assert [e["uid"] for e in shown["entries"]] == [0, 2] and shown["version"] == book[
        "version"
    ] + 5  # switched off, on, rekeyed, added, removed


async def test_constant_entries_go_into_the_system_prompt_where_their_position_says(api: Api) -> None:
    card = await api.card(name="Mira", description="A ferry pilot.", first_mes="The ferry waits.")
    entries = [
        {"key": [], "content": "Magic is forbidden on the coast.", "comment": "Law", "constant": True, "position": 0},
        {"key": [], "content": "Mira fears deep water.", "comment": "Fear", "constant": True, "position": 1},
        {"key": ["tide"], "content": "The tide turns at noon.", "comment": "Tide"},
    ]
    await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", world_info(entries))
    context = await context_at_words(api, card["id"], "Hello.")
    system = context["messages"][0]["content"]
    assert system.index("Magic is forbidden") < system.index("A ferry pilot.") < system.index("Mira fears deep water")
    assert {r["title"] for r in lore_refs(context, "system")} == {"Law", "Fear"}
    assert all(r["constant"] and r["key"] is None for r in lore_refs(context, "system"))
    last = context["messages"][-1]["content"]
    assert "Tide" in last and "The tide turns" not in last  # not hit: listed in the index by title only


async def test_the_title_index_keeps_to_its_budget_and_says_how_many_it_left_out(api: Api) -> None:
    card = await api.card(name="Mira", description="A ferry pilot.", first_mes="The ferry waits.")
    entries = [{"key": [f"isle{i}"], "content": f"Isle {i}.", "comment": f"Isle number {i:03d}"} for i in range(300)]
    await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", world_info(entries))
    last = (await context_at_words(api, card["id"], "Hello."))["messages"][-1]["content"]
    index = last[last.index("[Lore index]") : last.index("Hello.")]
    assert len(index) <= 2100 and "Isle number 000" in index and "Isle number 299" not in index
    listed = index.count("Isle number")
    assert f"({300 - listed} more not listed)" in index


async def test_the_embedded_book_and_an_attached_copy_of_it_fire_once(api: Api) -> None:
    card = await api.send("POST", "/v1/cards/import", (cards_dir() / "default_Seraphina.png").read_bytes())
    await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", (cards_dir() / "Eldoria.json").read_bytes())
    refs = lore_refs(await context_at_words(api, card["id"], "The shadowfang stalk the forest."))
    titles = [r["title"] for r in refs]
    assert sorted(titles) == sorted(set(titles)) and "shadowfang" in titles
    assert {r["book_id"] for r in refs} == {"embedded"}  # the card's own book wins


async def test_world_info_of_the_wrong_types_is_refused_at_its_field_and_nothing_attached(api: Api) -> None:
    card = await api.card()
    bad = {
        b"not json": "body",
        json.dumps({"entries": {"0": {"key": "reef", "content": "x"}}}).encode(): "body.entries.0.key",
        json.dumps({"entries": {"0": {"key": ["reef"], "content": 5}}}).encode(): "body.entries.0.content",
        json.dumps({"entries": 3}).encode(): "body.entries",
    }
    for raw, field in bad.items():
        async with api.client.post(f"/v1/cards/{card['id']}/lorebooks", data=raw, headers=api.headers) as response:
            problem = await response.json(content_type=None)
        assert response.status == 422 and problem["errors"][0]["field"] == field, (raw, problem)
    assert (await api.call("GET", f"/v1/cards/{card['id']}/lorebooks"))["items"] == []


async def test_the_embedded_book_is_read_only_here_and_changed_through_the_card(api: Api) -> None:
    card = await api.send("POST", "/v1/cards/import", (cards_dir() / "default_Seraphina.png").read_bytes())
    embedded = await api.call("GET", f"/v1/cards/{card['id']}/lorebooks/embedded")
    assert embedded["kind"] == "embedded" and len(embedded["entries"]) == 4
    await api.call("DELETE", f"/v1/cards/{card['id']}/lorebooks/embedded", status=422)
    book = card["card"]["character_book"]
    book["entries"] = book["entries"][:1]
    await api.call("PATCH", f"/v1/cards/{card['id']}", {"card": {"character_book": book}})
    assert len((await api.call("GET", f"/v1/cards/{card['id']}/lorebooks/embedded"))["entries"]) == 1


async def test_lore_search_finds_a_chinese_entry_from_words_without_spaces(api: Api) -> None:
    book = {
        "entries": [
            {
                "keys": ["怪兽", "影牙"],
                "content": "影牙是森林深处的怪兽，夜里出没。",
                "comment": "影牙",
                "enabled": True,
            },
            {"keys": ["灯塔"], "content": "北屿灯塔已熄灭一年。", "comment": "灯塔", "enabled": True},
        ]
    }
    card = await api.card(character_book=book)
    found = await api.call("GET", f"/v1/cards/{card['id']}/lore/search?q=森林里的怪兽会来吗")
    assert [item["entry"]["title"] for item in found["items"]][:1] == ["影牙"]
    assert found["items"][0]["book_id"] == "embedded" and found["items"][0]["score"] >= 5
    assert (await api.call("GET", f"/v1/cards/{card['id']}/lore/search?q=zzz"))["items"] == []


async def test_a_pathological_regex_key_runs_out_of_time_and_the_explain_list_says_so(api: Api) -> None:
    card = await api.card(name="Mira", description="A ferry pilot.", first_mes="The ferry waits.")
    entries = [
        {"key": ["/(a+)+$/"], "content": "Never shown.", "comment": "Slow"},
        {"key": ["ferry"], "content": "The ferry is old.", "comment": "Ferry"},
    ]
    await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", world_info(entries))
    context = await context_at_words(api, card["id"], "The ferry " + "a" * 5000 + "!")
    block = next(b for b in context["explain"] if b["what"] == "lore")
    assert [r["title"] for r in block["lore"]] == ["Ferry"]
    assert "over the time limit" in block["why"] and "(a+)+$" in block["why"]


async def test_lore_in_full_takes_its_room_from_the_window_and_the_context_keeps_its_budget(api: Api) -> None:
    long = " ".join(["The reef has torn the hulls of many boats along this coast."] * 80)
    card = await api.card(name="Mira", description="A ferry pilot.", first_mes="The ferry waits.")
    await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", world_info([{"key": ["reef"], "content": long}]))
    settings = {"context_window": 4096, "reply_reserve": 256, "recall_k": 0, "lore_bodies": "full", "lore_budget": 50}
    story = await api.call("POST", "/v1/stories", {"card_id": card["id"], "settings": settings}, 201)
    for i in range(200):
        await api.turn(story["id"], f"Turn {i}: how far to the harbour?", f"Turn {i}: a mile more, past the buoys.")
    await api.append(story["id"], "user", "Watch the reef!")
    await settled(api, story["id"])
    full = await api.call("GET", f"/v1/stories/{story['id']}/context")
    await api.call("PATCH", f"/v1/stories/{story['id']}", {"settings": {**settings, "lore_bodies": "titles"}})
    titles = await api.call("GET", f"/v1/stories/{story['id']}/context")
    for context in (full, titles):
        assert context["cut_turns"] == 0  # what left the window is in the summaries, not cut
        assert context["tokens"] <= context["budget"]
        assert context["tokens"] == sum(block["tokens"] for block in context["explain"])
    lore = {c["messages"][-1]["content"].count("torn the hulls"): c for c in (full, titles)}
    assert set(lore) == {0, 80}
    shown = [sum(len(b["node_ids"]) for b in c["explain"] if b["what"] == "verbatim") for c in (full, titles)]
    assert shown[0] < shown[1]  # the lore in full took its room out of the window
    await api.call("PATCH", f"/v1/stories/{story['id']}", {"settings": {**settings, "lore_budget": 25}})
    short = await api.call("GET", f"/v1/stories/{story['id']}/context")  # a quarter of 3,840 tokens: it does not fit
    assert "torn the hulls" not in short["messages"][-1]["content"]
    (block,) = [b for b in short["explain"] if b["what"] == "lore"]
    assert [(r["title"], r["left_out"]) for r in block["lore"]] == [("reef", "budget")]
    assert "left out: 'reef' (budget: no room left)" in block["why"]


async def test_an_entry_uid_that_is_not_a_plain_number_is_not_found(api: Api) -> None:
    card = await api.card()
    book = await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", world_info([{"key": ["x"], "content": "x"}]))
    for uid in ("%C2%B2", "1e3", "-1"):
        async with api.client.delete(
            f"/v1/cards/{card['id']}/lorebooks/{book['id']}/entries/{uid}", headers=api.headers
        ) as response:
            assert response.status == 404, uid


async def test_a_lorebooks_entries_are_listed_a_page_at_a_time_by_uid(api: Api) -> None:
    card = await api.card(name="Mira", first_mes="The ferry waits.")
    entries = [{"key": [f"key{i}"], "content": f"entry {i}", "comment": f"E{i}"} for i in range(7)]
    book = await api.send("POST", f"/v1/cards/{card['id']}/lorebooks?name=Coast", world_info(entries))
    await api.call("DELETE", f"/v1/cards/{card['id']}/lorebooks/{book['id']}/entries/2", status=204)
    pages, cursor = [], ""
    while True:
        page = await api.call("GET", f"/v1/cards/{card['id']}/lorebooks/{book['id']}/entries?limit=4{cursor}")
        pages.append([(e["uid"], e["title"], e["keys"]) for e in page["items"]])
        if page["next_cursor"] is None:
            break
        cursor = f"&cursor={page['next_cursor']}"
    assert pages == [
        [(0, "E0", ["key0"]), (1, "E1", ["key1"]), (3, "E3", ["key3"]), (4, "E4", ["key4"])],
        [(5, "E5", ["key5"]), (6, "E6", ["key6"])],
    ]
    assert page["lorebook_id"] == book["id"] and page["version"] > book["version"]
    seraphina = await api.send("POST", "/v1/cards/import", (cards_dir() / "default_Seraphina.png").read_bytes())
    embedded = await api.call("GET", f"/v1/cards/{seraphina['id']}/lorebooks/embedded/entries")
    assert [e["keys"][0] for e in embedded["items"]] == ["eldoria", "shadowfang", "glade", "power"]
    assert embedded["next_cursor"] is None
    other = await api.card(name="Nobody")
    await api.call("GET", f"/v1/cards/{other['id']}/lorebooks/embedded/entries", status=404)


async def test_a_probability_draw_is_the_nodes_the_same_each_read_and_a_branch_draws_its_own(api: Api) -> None:
    """Draws are seeded by the node the context is at: a context read again (a regenerate) has the same draw,
    the same words on another branch their own; the explain list shows each draw and what it decided."""
    card = await api.card(name="Mira", description="A ferry pilot.", first_mes="The ferry waits.")
    entry = {"key": ["reef"], "content": "The reef is sharp.", "comment": "Reef", "probability": 50}
    book = await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", world_info([entry]))
    story = await api.call("POST", "/v1/stories", {"card_id": card["id"]}, 201)
    rolls: dict[str, dict[str, Any]] = {}
    for _ in range(12):  # the same words, each on a branch of its own from the greeting
        user = (await api.append(story["id"], "user", "Mind the reef!", parent_id=story["root_id"]))["node"]
        path = f"/v1/stories/{story['id']}/context?at={user['id']}"
        first, again = await api.call("GET", path), await api.call("GET", path)
        assert first == again
        (ref,) = lore_refs(first)
        expected = draw(user["id"], f"{book['id']}\x1f0")
        assert ref["roll"] == round(expected, 2)
        assert (ref["left_out"] == "probability") == (expected >= 50)
        assert ("The reef is sharp." in first["messages"][-1]["content"]) == (expected < 50)
        rolls[user["id"]] = ref
    assert {r["left_out"] for r in rolls.values()} == {None, "probability"}  # 12 draws: both outcomes (1 in 2,048 not)
    left = next(r for r in rolls.values() if r["left_out"])
    assert left["detail"].startswith("probability: drew ") and left["detail"].endswith(" over 50.0")


@pytest.mark.parametrize("settings", [{"lore_budget": 0}, {"lore_budget": 101}, {"lore_min_activations": -1}])
async def test_lore_settings_out_of_range_are_refused_with_the_field(api: Api, settings: dict[str, int]) -> None:
    card = await api.card()
    problem = await api.call("POST", "/v1/stories", {"card_id": card["id"], "settings": settings}, 422)
    assert [e["field"] for e in problem["errors"]] == [f"body.settings.{next(iter(settings))}"]


async def test_sticky_and_cooldown_follow_the_path_and_a_branch_has_its_own(api: Api) -> None:
    """Timed effects are a projection of the path: a sticky entry named a turn ago is in without its key, a
    cooling one is out though named; on a branch where neither came in, neither timer runs."""
    card = await api.card(name="Mira", description="A ferry pilot.", first_mes="The ferry waits.")
    entries = [
        {"key": ["reef"], "content": "The reef is sharp.", "comment": "Reef", "sticky": 3, "scanDepth": 1},
        {"key": ["fog"], "content": "Fog hides the coast.", "comment": "Fog", "cooldown": 4, "scanDepth": 1},
    ]
    await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", world_info(entries))
    story = await api.call("POST", "/v1/stories", {"card_id": card["id"]}, 201)
    await api.turn(story["id"], "Mind the reef, the fog is thick.", "Aye.")
    words = (await api.append(story["id"], "user", "What now? The fog again."))["node"]
    context = await api.call("GET", f"/v1/stories/{story['id']}/context?at={words['id']}")
    refs = {r["title"]: r for r in lore_refs(context)}
    assert (refs["Reef"]["sticky"], refs["Reef"]["key"], refs["Reef"]["left_out"]) == (True, None, None)
    assert (
        refs["Fog"]["left_out"] == "cooldown" and refs["Fog"]["detail"] == "cooldown: 4 messages after it was last in"
    )
    assert "The reef is sharp." in context["messages"][-1]["content"]
    assert "Fog hides the coast." not in context["messages"][-1]["content"]
    assert "'Reef' (sticky)" in next(b["why"] for b in context["explain"] if b["what"] == "lore")

    first = (await api.append(story["id"], "user", "Nothing here.", parent_id=story["root_id"]))["node"]
    reply = (await api.append(story["id"], "reply", "Aye.", parent_id=first["id"]))["node"]
    branch = (await api.append(story["id"], "user", "What now? The fog again.", parent_id=reply["id"]))["node"]
    other = await api.call("GET", f"/v1/stories/{story['id']}/context?at={branch['id']}")
    refs = {r["title"]: r for r in lore_refs(other)}
    assert "Reef" not in refs and (refs["Fog"]["left_out"], refs["Fog"]["key"]) == (None, "fog")
    assert await api.call("GET", f"/v1/stories/{story['id']}/context?at={words['id']}") == context  # (the first again)


async def test_entries_placed_in_the_chat_go_at_their_depth_on_their_side_and_roles_still_alternate(api: Api) -> None:
    """SillyTavern's @depth (with its role) and author's note positions: in the assembled messages, not the
    system prompt nor the lore block; the explain list points at each, and the tokens still add up."""
    card = await api.card(name="Mira", description="A ferry pilot.", first_mes="The ferry waits.")
    entries = [
        {"key": ["reef"], "content": "[Mira speaks of reefs warily.]", "comment": "Wary", "position": 4, "depth": 2,
         "role": 2},
        {"key": ["reef"], "content": "[Answer in two sentences.]", "comment": "Short", "position": 4, "depth": 0},
        {"key": [], "content": "[The sea is calm today.]", "comment": "Calm", "constant": True, "position": 4,
         "depth": 4, "role": 1},
        {"key": ["reef"], "content": "[Note: the tide is low.]", "comment": "Tide", "position": 2},
        {"key": ["reef"], "content": "Reefs line the north shore.", "comment": "Reefs"},
        {"key": ["reef"], "content": "[S1]", "comment": "S1", "position": 4, "depth": 1, "role": 0},
        {"key": ["reef"], "content": "[U1]", "comment": "U1", "position": 4, "depth": 1, "role": 1},
    ]  # fmt: skip
    await api.send("POST", f"/v1/cards/{card['id']}/lorebooks", world_info(entries))
    story = await api.call("POST", "/v1/stories", {"card_id": card["id"], "settings": {"lore_bodies": "full"}}, 201)
    await api.turn(story["id"], "Hello there.", "Welcome aboard.")
    await api.turn(story["id"], "Is it far?", "Not far.")
    await api.append(story["id"], "user", "Mind the reef!")
    context = await api.call("GET", f"/v1/stories/{story['id']}/context")
    messages = [(m["role"], m["content"]) for m in context["messages"]]
    roles = [role for role, _ in messages]
    assert roles == ["system", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert messages[5][1].startswith("[Mira speaks of reefs warily.]\n\nNot far.")  # 2 from the end: the reply
    assert messages[-1][1].endswith("Mind the reef!\n\n[Answer in two sentences.]")  # 0: after the words
    assert messages[-1][1].startswith("[U1]\n\n[S1]\n\n")  # 1: the last message's start, user before system
    calm_then_tide = "Hello there.\n\n[The sea is calm today.]\n\n[Note: the tide is low.]"
    assert messages[2][1] == calm_then_tide  # 4 up: at the end of the user's message, user texts before system
    assert "calm today" not in messages[0][1]  # (not the system prompt)
    lore = next(b for b in context["explain"] if b["what"] == "lore")
    assert [r["title"] for r in lore["lore"]] == ["Reefs"] and "5 placed in the chat" in lore["why"]
    placed = [b for b in context["explain"] if b["what"] == "lore_in_chat"]
    assert sorted(r["title"] for b in placed for r in b["lore"]) == ["Calm", "S1", "Short", "Tide", "U1", "Wary"]
    for block in context["explain"]:  # every span still points at its text
        if block["span"] is not None and block["message_index"] == block["end_message"]:
            start, end = block["span"]
            assert end - start == block["chars"], block
    for block in placed:
        start, end = block["span"]
        assert messages[block["message_index"]][1][start:end].startswith("[")
    user_words = next(b for b in context["explain"] if b["what"] == "user")
    start, end = user_words["span"]
    assert messages[user_words["message_index"]][1][start:end] == "Mind the reef!"
    assert context["tokens"] == sum(block["tokens"] for block in context["explain"])
