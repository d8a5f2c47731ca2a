"""The upstream gets changji's context instead of the history, with the client's own prompts, tools and images."""

from __future__ import annotations

from api.keys import SERVICE
from projections.context.relayed import CLIENT_PART_TYPE, TEXT_TYPE
from providers.fake_server import FakeModelServer, Text, ToolCalls
from tests.e2e.proxy_front_end.front_end import GREETING, SYSTEM, Front, path_texts


async def test_the_upstream_gets_the_memory_not_the_history(fake: FakeModelServer, front: Front) -> None:
    fake.script(*[Text(f"Reply {i}: the fog lifts a little, and the lamp on the bow swings.") for i in range(40)])
    _, headers = await front.send("Turn 0: where are we?")
    card = (await front.api.call("GET", f"/v1/stories/{headers['x-changji-story']}"))["card_id"]
    settings = {"keep_turns": 2, "pack_turns": 4, "min_pack_chars": 0, "context_window": 1024, "reply_reserve": 0}
    await front.api.call("PATCH", f"/v1/cards/{card}", {"settings": settings})
    for i in range(1, 30):
        await front.send(f"Turn {i}: where are we now, and how far is the harbour?")
    sent = fake.requests[-1]["messages"]
    assert sent[0] == {"role": "system", "content": SYSTEM}  # the client's fixed prompt as it came
    assert len(front.messages()) > 55 and len(sent) < 40  # (a window filling 1,024 tokens: not the 60 messages)
    assert sent[-1]["content"].endswith("Turn 29: where are we now, and how far is the harbour?")
    path = await path_texts(front.api, headers["x-changji-story"])
    assert len(path) == 61  # every turn recorded once


async def test_a_proxied_context_that_would_cut_turns_announces_a_pack(fake: FakeModelServer, front: Front) -> None:
    fake.fallback = lambda body: Text("The fog lifts a little, and the lamp on the bow swings in the wind again.")
    _, headers = await front.send("Turn 0: where are we?")
    story = headers["x-changji-story"]
    card = (await front.api.call("GET", f"/v1/stories/{story}"))["card_id"]
    settings = {"pack_turns": 0, "min_pack_chars": 0, "context_window": 768, "reply_reserve": 0, "keep_turns": 2}
    await front.api.call("PATCH", f"/v1/cards/{card}", {"settings": settings})  # no packs as turns go by
    for i in range(1, 20):
        await front.send(f"Turn {i}: where are we now, and how far is the harbour from here?")
    jobs = (await front.api.call("GET", f"/v1/jobs?story_id={story}&kind=compact"))["items"]
    assert jobs and {job["detail"] for job in jobs} & {"budget"}, jobs


async def test_the_context_at_a_proxied_turn_is_what_the_upstream_got(fake: FakeModelServer, front: Front) -> None:
    def asked(lore: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": f"{SYSTEM}\n{lore}"},
            {"role": "system", "name": "example_user", "content": "Is the ferry late?"},
            {"role": "system", "name": "example_assistant", "content": "'Never,' Mira says."},
            {"role": "assistant", "content": GREETING},
            {"role": "system", "content": "[Author's note: it is raining.]"},
            {"role": "user", "content": "Is the harbour far?"},
            {"role": "system", "content": "Stay in character; never speak for the user."},
        ]

    fake.script(Text("'Two miles,' Mira says."), Text("'Two miles, in this fog,' Mira says."))
    _, headers = await front.complete(asked("[The harbour light is red.]"), stream=False)
    story = headers["x-changji-story"]
    user = (await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}"))["parent_id"]
    shown = await front.api.call("GET", f"/v1/stories/{story}/context?at={user}")
    sent = [{"role": m["role"], "content": m["content"]} for m in fake.requests[-1]["messages"]]
    assert [{"role": m["role"], "content": m["content"]} for m in shown["messages"]] == sent
    assert sent[0]["content"].endswith("[The harbour light is red.]")
    assert fake.requests[-1]["messages"][1:3] == asked("")[1:3]  # the examples as they came, with their names
    assert sent[-1] == {"role": "system", "content": "Stay in character; never speak for the user."}
    whats = [block["what"] for block in shown["explain"]]
    assert "client block" in whats and "client after" in whats
    named = {
        block["what"]: shown["messages"][block["message_index"]]["content"][slice(*block["span"])]
        for block in shown["explain"]
        if block["what"] in ("client block", "client after")
    }  # each block's span names its text in the messages shown
    assert named == {
        "client block": "[Author's note: it is raining.]", "client after": "Stay in character; never speak for the user."
    }  # fmt: skip
    _, again = await front.complete(asked("[The harbour light is green.]"), stream=False)  # a swipe, other lore
    assert (await front.api.call("GET", f"/v1/nodes/{again['x-changji-node']}"))["parent_id"] == user
    shown = await front.api.call("GET", f"/v1/stories/{story}/context?at={user}")
    assert shown["messages"][0]["content"].endswith("[The harbour light is green.]")
    assert [m["content"] for m in shown["messages"]] == [m["content"] for m in fake.requests[-1]["messages"]]
    kept = front.api.client.app[SERVICE].keys.blob_conn.execute("select media_type, count(*) from blobs group by 1")
    assert dict(kept.fetchall()) == {
        CLIENT_PART_TYPE: 2,
        TEXT_TYPE: 6,
    }  # each text once: the two prompts, the rest shared


async def test_a_tool_round_of_the_clients_own_tools_reaches_the_upstream_and_one_reply_is_recorded(
    fake: FakeModelServer, front: Front
) -> None:
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}]
    opening = [
        {"role": "system", "content": "You are a ferry dispatcher."},
        {"role": "user", "content": "Will it be foggy?"},
    ]
    for stream in (False, True):  # the same round, as a streamed request too (the calls after some words)
        words = "Let me look at the forecast." if stream else ""
        fake.script(ToolCalls(("weather", {"port": "Oslo"}), text=words), Text("Yes, fog until noon."), Text("Then it clears."))  # fmt: skip
        raw = await front.client.chat.completions.with_raw_response.create(
            model="fake-model",
            messages=opening,
            tools=tools,
            stream=False,  # type: ignore[arg-type]
        )
        call = raw.parse().choices[0].message
        story = raw.headers["x-changji-story"]
        assert call.tool_calls and call.tool_calls[0].function.name == "weather"
        asked = [
            *opening,
            {"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in call.tool_calls]},
            {"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": '{"fog": "until noon"}'},
        ]
        text, headers = await front.complete(asked, stream=stream, tools=tools)
        assert text == "Yes, fog until noon." and headers["x-changji-story"] == story
        got = fake.requests[-1]["messages"]
        assert got[-2]["tool_calls"][0]["function"]["name"] == "weather"  # the round as it came, after the words
        assert got[-1] == asked[-1] and got[-3]["content"].endswith("Will it be foggy?")
        path = await path_texts(front.api, story)
        assert path[1:] == [("user", "Will it be foggy?"), ("reply", "Yes, fog until noon.")]
        siblings = (await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}/siblings"))["nodes"]
        assert sorted((n["text"], n["phase"]) for n in siblings) == [
            ("", "stopped"),
            ("Yes, fog until noon.", "sealed"),
        ]
        costs = await front.api.call("GET", f"/v1/stories/{story}/costs")
        assert costs["calls"] == 2 and costs["prompt_tokens"] == 200  # the round's call counted as it was
        exported = await front.api.client.get(
            f"/v1/stories/{story}/export?format=sillytavern&scope=tree", headers=front.api.headers
        )
        if words:  # the round's words are the front end's (sent back with the round), not a swipe
            assert words not in await exported.text()
        later = [*asked, {"role": "assistant", "content": text}, {"role": "user", "content": "And after?"}]
        text, headers = await front.complete(later, stream=False, tools=tools)
        assert headers["x-changji-story"] == story
        assert (await path_texts(front.api, story))[1:] == [
            ("user", "Will it be foggy?"), ("reply", "Yes, fog until noon."), ("user", "And after?"), ("reply", "Then it clears."),
        ]  # fmt: skip
        opening = [{"role": "system", "content": "You are a night dispatcher."}, opening[1]]  # (another story)


async def test_an_image_with_the_users_words_reaches_the_upstream_and_the_story_keeps_the_words(
    fake: FakeModelServer, front: Front
) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    words = {"role": "user", "content": [{"type": "text", "text": "What is on this chart?"}, image]}
    fake.script(Text("'A reef,' Mira says."))
    text, headers = await front.complete([{"role": "system", "content": SYSTEM}, words], stream=False)
    assert text == "'A reef,' Mira says."
    got = fake.requests[-1]["messages"][-1]["content"]
    assert isinstance(got, list) and got[1] == image and got[0]["text"].endswith("What is on this chart?")
    path = await path_texts(front.api, headers["x-changji-story"])
    assert path[1:] == [("user", "What is on this chart?"), ("reply", "'A reef,' Mira says.")]


async def test_a_new_chat_with_a_played_card_gets_the_cards_memory_from_its_first_turn(
    fake: FakeModelServer, front: Front
) -> None:
    fake.script(Text("The lamp on the bow is cracked; Oskar mends it on Sundays."), Text("Yes, every Sunday."))
    await front.send("Tell me about the lamp on the bow.")
    _, headers = await front.send("Who mends it?")
    first = headers["x-changji-story"]
    card = (await front.api.call("GET", f"/v1/stories/{first}"))["card_id"]
    synced = await front.api.call("POST", f"/v1/cards/{card}/memory/sync")
    assert synced["merged"] and "Oskar" in synced["memory"]["resident"]

    again = Front(front.api)  # a new chat of the same character
    fake.script(Text("Aye."))
    _, headers = await again.send("Evening, Mira. Is Oskar still mending things?")
    await again.client.close()
    assert headers["x-changji-story"] != first
    sent = fake.requests[-1]["messages"]
    assert sent[0] == {"role": "system", "content": SYSTEM}
    told = "\n".join(m["content"] for m in sent if m["role"] == "user")
    assert "Oskar mends it on Sundays" in told and "[Story so far]" in told  # (the resident summary, in English)
    assert sent[-1]["content"].endswith("Evening, Mira. Is Oskar still mending things?")


async def test_the_upstream_gets_the_re_anchoring_block_before_the_users_words(
    fake: FakeModelServer, front: Front
) -> None:
    fake.fallback = lambda body: Text("'Two miles,' Mira says, and turns back to the wheel.")
    _, headers = await front.send("Turn 1: where are we?")
    card = (await front.api.call("GET", f"/v1/stories/{headers['x-changji-story']}"))["card_id"]
    anchor = "{{char}} pilots the ferry: terse, kind, never leaves the bow in a storm."
    await front.api.call("PATCH", f"/v1/cards/{card}", {"settings": {"reanchor_turns": 3, "identity_anchor": anchor}})
    await front.send("Turn 2: how far is the harbour?")
    assert "pilots the ferry" not in fake.requests[-1]["messages"][-1]["content"]
    await front.send("Turn 3: will you stay at the bow?")
    last = fake.requests[-1]["messages"][-1]
    assert last["role"] == "user" and last["content"].endswith("Turn 3: will you stay at the bow?")
    block = last["content"].split("\n\n")[-2]
    assert block.startswith("[WHO ") and "pilots the ferry: terse, kind, never leaves the bow in a storm." in block
    assert "{{char}}" not in block and "periodic reminder" in block
    await front.send("Turn 4: and then?")
    assert "pilots the ferry" not in fake.requests[-1]["messages"][-1]["content"]
