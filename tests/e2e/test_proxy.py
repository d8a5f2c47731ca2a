"""The chat-completions proxy with the official `openai` client, the fake model as the upstream: a front end
that sends its whole history every time ends with the right tree, and the upstream gets changji's
context instead of the history."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from itertools import count
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestClient

from api.app import create_app
from api.keys import SERVICE
from api.settings import Settings
from projections.context.relayed import CLIENT_PART_TYPE, TEXT_TYPE
from providers.fake_server import FakeModelServer, Status, Text, ToolCalls
from tests.builders import TENANT, Api, api_for
from tests.e2e.conftest import ServiceTestServer
from tests.fake_model import MakeEngine, main_model

SYSTEM = "You are Mira, a ferry pilot on a foggy coast. Stay in character."
GREETING = "The ferry horn sounds. 'Last crossing tonight,' Mira says."


def client_for(api: Api, key: str | None = None) -> openai.AsyncOpenAI:
    base = str(api.client.make_url("/v1"))
    return openai.AsyncOpenAI(base_url=base, api_key=key or api.headers["Authorization"].removeprefix("Bearer "))


class Front:
    """A front end that keeps its own history and sends all of it every time."""

    def __init__(self, api: Api) -> None:
        self.api, self.client = api, client_for(api)
        self.chat: list[dict[str, str]] = []

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM}, {"role": "assistant", "content": GREETING}, *self.chat]

    async def send(self, words: str | None = None, stream: bool = False, **more: Any) -> tuple[str, dict[str, str]]:
        if words is not None:
            self.chat.append({"role": "user", "content": words})
        text, headers = await self.complete(self.messages(), stream, **more)
        self.chat.append({"role": "assistant", "content": text})
        return text, headers

    async def stop(self) -> None:
        """Closes the client and the service it talks to (a restart's first half)."""
        await self.client.close()
        await self.api.client.close()

    async def play(self, fake: FakeModelServer, *words: str) -> str:
        """A turn for each of `words`, answered r1, r2…; the story's id."""
        fake.script(*[Text(f"r{i}") for i in range(1, len(words) + 1)])
        for said in words:
            _, headers = await self.send(said)
        return headers["x-changji-story"]

    async def complete(self, messages: list[dict[str, str]], stream: bool, **more: Any) -> tuple[str, dict[str, str]]:
        if stream:
            async with self.client.chat.completions.with_streaming_response.create(
                model="fake-model",
                messages=messages,
                stream=True,
                **more,  # type: ignore[arg-type]
            ) as response:
                chunks = await response.parse()
                parts = [chunk.choices[0].delta.content or "" async for chunk in chunks if chunk.choices]
                return "".join(parts), dict(response.headers)
        raw = await self.client.chat.completions.with_raw_response.create(
            model="fake-model",
            messages=messages,
            **more,  # type: ignore[arg-type]
        )
        return raw.parse().choices[0].message.content or "", dict(raw.headers)


async def path_texts(api: Api, story_id: str) -> list[tuple[str, str]]:
    path = await api.call("GET", f"/v1/stories/{story_id}/path?limit=10000")
    return [(n["kind"], n["text"]) for n in path["nodes"]]


@pytest.fixture
async def front(make_engine: MakeEngine) -> AsyncIterator[Front]:
    played = Front(await make_engine(embedder="none"))
    yield played
    await played.client.close()


async def test_turns_swipes_an_edit_a_continue_and_a_quiet_request_make_the_right_tree(
    fake: FakeModelServer, front: Front
) -> None:
    fake.script(Text("'Climb aboard.'"), Text(["'The fog ", "is thick.'"]))
    first, headers = await front.send("Is there room for one more?")
    story = headers["x-changji-story"]
    assert first == "'Climb aboard.'" and headers["x-changji-recorded"] == "true"
    second, headers = await front.send("How long is the crossing?", stream=True)
    assert second == "'The fog is thick.'" and headers["x-changji-story"] == story  # found again by its content
    assert await path_texts(front.api, story) == [
        ("greeting", GREETING), ("user", "Is there room for one more?"), ("reply", first),
        ("user", "How long is the crossing?"), ("reply", second),
    ]  # fmt: skip

    front.chat.pop()  # a swipe: the front end resends the previous prompt unchanged
    fake.script(Text("'An hour, if the sea is kind.'"))
    swiped, headers = await front.send(None, stream=True)
    siblings = await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}/siblings")
    assert sorted(n["text"] for n in siblings["nodes"]) == sorted([second, swiped])

    fake.script(Text("'Two hours, then.'"))
    edited = [*front.messages()[:4], {"role": "user", "content": "How long, truly?"}]  # an edit two messages back
    text, headers = await front.complete(edited, stream=False)
    path = await path_texts(front.api, story)
    assert path == [
        ("greeting", GREETING), ("user", "Is there room for one more?"), ("reply", first),
        ("user", "How long, truly?"), ("reply", "'Two hours, then.'"),
    ]  # fmt: skip
    tree = await front.api.call("GET", f"/v1/stories/{story}/tree")
    assert len(tree["nodes"]) == 8  # nothing lost: the old branch stays

    quiet = [*front.messages(), {"role": "system", "content": "Summarize the story so far in one line."}]
    fake.script(Text("A ferry, a fog, a passenger."))
    summary, headers = await front.complete(quiet, stream=False)
    assert headers["x-changji-recorded"] == "false" and summary == "A ferry, a fog, a passenger."
    assert fake.requests[-1]["messages"] == quiet  # passed through unchanged
    assert len((await front.api.call("GET", f"/v1/stories/{story}/tree"))["nodes"]) == 8

    continued = [*edited, {"role": "assistant", "content": text}]  # continue the last reply
    fake.script(Text(" 'Maybe three.'", prompt_tokens=321))
    calls = (await front.api.call("GET", f"/v1/stories/{story}/costs"))["calls"]
    more, headers = await front.complete(continued, stream=True)
    costs = await front.api.call("GET", f"/v1/stories/{story}/costs")
    assert costs["calls"] == calls + 1  # the continue's call in the ledger too
    assert headers["x-changji-recorded"] == "true"
    reply = await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}")
    assert reply["text"] == "'Two hours, then.' 'Maybe three.'" and more == " 'Maybe three.'"


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


async def test_the_models_and_the_errors_speak_openai(fake: FakeModelServer, front: Front) -> None:
    listed = await front.client.models.list()
    assert [m.id for m in listed.data] == ["fake-model"]
    for key in ("undefined", "cj_not-a-key"):
        async with client_for(front.api, key) as stranger:
            with pytest.raises(openai.AuthenticationError) as refused:
                await stranger.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "hi"}])
        assert refused.value.status_code == 401 and refused.value.body["type"] == "authentication_error"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as bad:
        await front.client.chat.completions.create(model="fake-model", messages=[])
    assert bad.value.body["param"] == "messages"  # type: ignore[index]
    fake.script(Status(400))
    with pytest.raises(openai.BadRequestError) as failed:  # the upstream's refusal, as it came
        await front.client.chat.completions.create(model="fake-model", messages=[*front.messages(), {"role": "user", "content": "hello"}])  # fmt: skip
    assert failed.value.status_code == 400 and "scripted 400" in failed.value.body["message"]  # type: ignore[index]


async def test_a_browser_front_end_of_an_allowed_origin_may_call_the_proxy(
    fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    api = await make_engine(embedder="none", cors_origins=["https://play.example"])
    asked = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, x-changji-story",
    }
    origin = {"Origin": "https://play.example"}
    async with api.client.options("/v1/chat/completions", headers={**origin, **asked}) as preflight:
        assert (
            preflight.status == 200 and "X-CHANGJI-STORY" in preflight.headers["Access-Control-Allow-Headers"].upper()
        )
    fake.script(Text("'Aye.'"))
    body = {
        "model": "fake-model",
        "messages": [{"role": "assistant", "content": GREETING}, {"role": "user", "content": "Hi"}],
    }
    async with api.client.post("/v1/chat/completions", json=body, headers={**api.headers, **origin}) as answer:
        assert answer.status == 200 and answer.headers["Access-Control-Allow-Origin"] == "https://play.example"
        assert "X-CHANGJI-STORY" in answer.headers["Access-Control-Expose-Headers"].upper()


async def test_a_chat_of_two_hundred_turns_sent_as_front_ends_send_it_ends_as_the_right_tree(
    fake: FakeModelServer, front: Front
) -> None:
    """The whole history every time; swipes every 25 turns, an edit three turns back at 120, a continue at
    150, a summary request of the front end's own every 40 turns: siblings, a branch, nothing lost, nothing
    duplicated, and the upstream got the compacted context, not the history."""
    replies = count()
    fake.fallback = lambda body: Text(f"Reply {next(replies)} to: {body['messages'][-1]['content'][-40:]}")
    _, headers = await front.send("Turn 0: hello?")
    story = headers["x-changji-story"]
    card = (await front.api.call("GET", f"/v1/stories/{story}"))["card_id"]
    settings = {"keep_turns": 4, "pack_turns": 10, "min_pack_chars": 0, "context_window": 2048, "reply_reserve": 256}
    await front.api.call("PATCH", f"/v1/cards/{card}", {"settings": settings})
    swipes = edits = continues = quiet = 0
    for turn in range(1, 200):
        _, headers = await front.send(f"Turn {turn}: what do you see on the water now?")
        assert headers["x-changji-story"] == story and headers["x-changji-recorded"] == "true"
        if turn % 25 == 0:  # a swipe: the last reply dropped, the same prompt again
            front.chat.pop()
            await front.send(None)
            swipes += 1
        if turn % 40 == 0:  # the front end's own summary request: forwarded, not recorded
            asked = [*front.messages(), {"role": "system", "content": "Summarize the chat in one line."}]
            _, headers = await front.complete(asked, stream=False)
            assert headers["x-changji-recorded"] == "false"
            quiet += 1
        if turn == 120:  # an edit three turns back: a branch from there, holding what follows
            front.chat[-6] = {"role": "user", "content": "Turn 118, asked again: what do you see?"}
            front.chat.pop()
            await front.send(None, stream=True)
            edits += 1
        if turn == 150:  # a continue of the last reply
            continued, headers = await front.complete(front.messages(), stream=True)
            front.chat[-1]["content"] += continued
            continues += 1
    path = await path_texts(front.api, story)
    expected = [("greeting", GREETING)] + [
        ("user" if m["role"] == "user" else "reply", m["content"]) for m in front.chat
    ]
    assert path == expected  # the story's path is the front end's chat, message for message
    tree = await front.api.call("GET", f"/v1/stories/{story}/tree?limit=5000")
    texts = [(n["kind"], n["parent_id"], n.get("preview") or n.get("text")) for n in tree["nodes"]]
    assert len(texts) == len(set(texts))  # nothing recorded twice
    # 200 turns, a sibling reply for each swipe, the branch (the edited words, the four messages after them,
    # its new reply), nothing for the quiet requests or the continue
    assert len(tree["nodes"]) == 1 + 400 + swipes + 6
    sent = fake.requests[-1]["messages"]
    assert len(front.messages()) > 400 and len(sent) < 80 and sent[0] == {"role": "system", "content": SYSTEM}
    context = await front.api.call("GET", f"/v1/stories/{story}/context")
    assert {"digest", "episode"} & {b["what"] for b in context["explain"]}
    assert (swipes, edits, continues, quiet) == (7, 1, 1, 4)


async def test_a_swipe_back_to_an_earlier_reply_goes_on_from_it_without_a_copy(
    fake: FakeModelServer, front: Front
) -> None:
    fake.script(Text("A1"), Text("A2"), Text("B1"))
    _, headers = await front.send("u1")
    front.chat.pop()
    await front.send(None)  # a swipe: A2 beside A1, and the leaf on A2
    front.chat[-1] = {"role": "assistant", "content": "A1"}  # the user swipes back to A1 and goes on
    await front.send("u2")
    story = headers["x-changji-story"]
    tree = (await front.api.call("GET", f"/v1/stories/{story}/tree"))["nodes"]
    assert sorted(n["kind"] for n in tree) == ["greeting", "reply", "reply", "reply", "user", "user"]
    assert await path_texts(front.api, story) == [("greeting", GREETING), ("user", "u1"), ("reply", "A1"),
                                                  ("user", "u2"), ("reply", "B1")]  # fmt: skip


async def test_a_prefill_is_the_start_of_the_reply_and_instructions_after_the_users_words_are_sent_on(
    fake: FakeModelServer, front: Front
) -> None:
    fake.script(Text("'Aye,'"), Text(" she said."))
    _, headers = await front.send("u1")
    prefilled = [*front.messages(), {"role": "user", "content": "u2"}, {"role": "assistant", "content": "Well,"}]
    text, headers = await front.complete(prefilled, stream=False)
    reply = await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}")
    assert reply["text"] == "Well, she said." and text == " she said."
    fake.script(Text("'Fine.'"))
    ruled = [*front.messages(), {"role": "user", "content": "u3"}, {"role": "system", "content": "[Stay terse.]"}]
    _, headers = await front.complete(ruled, stream=True)
    assert headers["x-changji-recorded"] == "true"  # post-history instructions: still the user's turn
    assert fake.requests[-1]["messages"][-1] == {"role": "system", "content": "[Stay terse.]"}


async def test_a_stream_the_client_abandons_is_kept_as_a_draft_and_an_upstream_refusal_keeps_its_status(
    fake: FakeModelServer, front: Front
) -> None:
    fake.script(Text(["'One", " two", " three'"], chunk_delay=0.2))
    body = {"model": "fake-model", "stream": True, "messages": [*front.messages(), {"role": "user", "content": "Go"}]}
    async with front.api.client.post("/v1/chat/completions", json=body, headers=front.api.headers) as response:
        story, node = response.headers["X-Changji-Story"], response.headers["X-Changji-Node"]
        await response.content.readline()  # the first chunk, then the client goes away
    for _ in range(100):
        reply = await front.api.call("GET", f"/v1/nodes/{node}")
        if reply["phase"] == "stopped":
            break
        await asyncio.sleep(0.05)
    assert reply["phase"] == "stopped" and reply["text"].startswith("'One") and reply["story_id"] == story
    fake.script(Status(400))
    async with front.api.client.post("/v1/chat/completions", json=body, headers=front.api.headers) as refused:
        answer = await refused.json()
    assert refused.status == 400 and "scripted 400" in answer["error"]["message"]


async def test_a_front_end_that_cuts_its_history_to_its_context_size_goes_on_in_its_story(
    fake: FakeModelServer, front: Front
) -> None:
    fake.script(Text("r1"), Text("r2"), Text("r3"), Text("r4"))
    _, headers = await front.send("u1")
    await front.send("u2")
    await front.send("u3")
    trimmed = [{"role": "system", "content": SYSTEM}, *front.chat[-2:], {"role": "user", "content": "u4"}]
    _, later = await front.complete(trimmed, stream=False)  # the greeting and the oldest turns cut
    assert later["x-changji-story"] == headers["x-changji-story"] and later["x-changji-recorded"] == "true"
    path = await path_texts(front.api, headers["x-changji-story"])
    assert path[-4:] == [("user", "u3"), ("reply", "r3"), ("user", "u4"), ("reply", "r4")] and len(path) == 9
    fake.script(Text("r5"))
    cut = [{"role": "system", "content": SYSTEM}, *[m for m in front.chat if m["content"] in ("r2", "u3", "r3")],
           {"role": "user", "content": "u4"}, {"role": "assistant", "content": "r4"}, {"role": "user", "content": "u5"}]  # fmt: skip
    _, latest = await front.complete(cut, stream=False)  # cut so that it opens with the character's words
    assert latest["x-changji-story"] == headers["x-changji-story"]
    assert (await path_texts(front.api, headers["x-changji-story"]))[-2:] == [("user", "u5"), ("reply", "r5")]


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


async def test_a_cut_chat_goes_on_in_the_story_of_its_own_prompt_when_another_chat_had_the_same_exchange(
    fake: FakeModelServer, front: Front
) -> None:
    async def chat(system: str, words: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "assistant", "content": "Hello."}]
        fake.script(Text("ok."))
        _, headers = await front.complete([*messages, {"role": "user", "content": words}], stream=False)
        return headers["x-changji-story"]

    mine, other = await chat("You are Mira.", "yes"), await chat("You are Oskar.", "yes")
    assert mine != other
    cut = [{"role": "system", "content": "You are Mira."}, {"role": "user", "content": "yes"},
           {"role": "assistant", "content": "ok."}, {"role": "user", "content": "and then?"}]  # fmt: skip
    fake.script(Text("then."))
    _, headers = await front.complete(cut, stream=False)
    assert headers["x-changji-story"] == mine


async def test_a_cut_chat_goes_on_in_its_story_after_a_restart_whatever_its_system_text_became(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    async def served() -> Front:
        app = create_app(Settings(data_dir=tmp_path / "data", embedder="none", main_model=main_model(fake)))
        client: TestClient[Any, Any] = TestClient(ServiceTestServer(app))
        await client.start_server()
        return Front(api_for(client, TENANT))

    front = await served()
    story = await front.play(fake, "u1", "u2", "u3", "u4")
    await front.stop()
    front = await served()  # the proxy's memory of the chat is gone: what it knows is in the tree
    try:
        lore = f"{SYSTEM}\n[The lighthouse on the point has been dark for a year.]"  # the front end's lore came in
        cut = [{"role": "system", "content": lore}, *front_chat(4)[-5:], {"role": "user", "content": "u5"}]
        fake.script(Text("r5"), Text("r5 again"))
        _, headers = await front.complete(cut, stream=False)
        assert headers["x-changji-story"] == story and headers["x-changji-recorded"] == "true"
        path = await path_texts(front.api, story)
        assert path[-4:] == [("user", "u4"), ("reply", "r4"), ("user", "u5"), ("reply", "r5")] and len(path) == 11
        await front.stop()
        front = await served()
        _, again = await front.complete(cut, stream=False)  # the same cut chat again, after a restart: a swipe
        assert again["x-changji-story"] == story
        replies = await front.api.call("GET", f"/v1/nodes/{again['x-changji-node']}")
        path = await path_texts(front.api, story)
        assert path[-2:] == [("user", "u5"), ("reply", "r5 again")] and len(path) == 11
        assert (
            replies["parent_id"]
            == (await front.api.call("GET", f"/v1/stories/{story}/path?limit=10000"))["nodes"][-2]["id"]
        )
        unrelated = [
            {"role": "system", "content": "You are Oskar."},
            *front_chat(4)[-3:],
            {"role": "user", "content": "u5"},
        ]
        fake.script(Text("oskar"))
        _, other = await front.complete(unrelated, stream=False)  # another card's: more than one exchange needed
        assert other["x-changji-story"] != story
    finally:
        await front.stop()


def front_chat(turns: int) -> list[dict[str, str]]:
    """The chat `Front` keeps after `turns` turns of u1/r1, u2/r2…"""
    chat = []
    for i in range(1, turns + 1):
        chat += [{"role": "user", "content": f"u{i}"}, {"role": "assistant", "content": f"r{i}"}]
    return chat


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


async def test_two_cards_sharing_a_preset_are_two_stories(fake: FakeModelServer, front: Front) -> None:
    preset = "\n".join(f"Rule {i}: write vivid, third-person prose and never speak for the user." for i in range(12))
    fake.script(Text("Xavier grunts."), Text("Yolanda waves."))
    stories = []
    for who in ("You are Xavier, a grumpy lighthouse keeper.", "You are Yolanda, a cheerful baker."):
        _, headers = await front.complete([{"role": "system", "content": f"{preset}\n{who}"}, {"role": "user", "content": "Hi"}], stream=False)  # fmt: skip
        stories.append(headers["x-changji-story"])
    assert stories[0] != stories[1]  # (much of the system text alike, but no greeting of the story's)


async def test_a_cut_chat_that_opens_with_the_storys_first_words_goes_on_at_its_leaf(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "...", "u2", "u3", "...", "u5", "u6")
    fake.script(Text("r7"))
    before = len((await front.api.call("GET", f"/v1/stories/{story}/tree"))["nodes"])
    cut = [
        {"role": "system", "content": SYSTEM},
        *front.chat[6:],
        {"role": "user", "content": "u7"},
    ]  # opens with "..."
    _, headers = await front.complete(cut, stream=False)
    assert headers["x-changji-story"] == story
    assert len((await front.api.call("GET", f"/v1/stories/{story}/tree"))["nodes"]) == before + 2
    assert (await path_texts(front.api, story))[-4:] == [
        ("user", "u6"),
        ("reply", "r6"),
        ("user", "u7"),
        ("reply", "r7"),
    ]


async def test_a_cut_chat_asks_for_a_summary_and_a_continue_without_a_new_story(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "u1", "u2", "u3", "u4", "u5")
    stories = len((await front.api.call("GET", "/v1/stories"))["items"])
    cut = [{"role": "system", "content": SYSTEM}, *front.chat[-6:]]
    fake.script(Text("A ferry crossing in fog."), Text(" And the lamp swings."))
    _, quiet = await front.complete([*cut, {"role": "system", "content": "Summarize the story so far."}], stream=False)
    assert quiet["x-changji-recorded"] == "false" and "x-changji-story" not in quiet
    assert fake.requests[-1]["messages"][-1]["content"] == "Summarize the story so far."  # as it came
    more, went_on = await front.complete(cut, stream=True)  # a continue of the last reply
    assert went_on["x-changji-story"] == story and more == " And the lamp swings."
    assert (await path_texts(front.api, story))[-1] == ("reply", "r5 And the lamp swings.")
    user = (await front.api.call("GET", f"/v1/nodes/{went_on['x-changji-node']}"))["parent_id"]
    shown = (await front.api.call("GET", f"/v1/stories/{story}/context?at={user}"))["messages"]
    assert shown[-1] == {"role": "assistant", "content": "r5"}  # what the continue sent: the reply so far
    assert len((await front.api.call("GET", "/v1/stories"))["items"]) == stories  # no story made for either


async def test_an_edit_of_the_first_reply_branches_though_the_rest_of_the_chat_repeats_the_leaf(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "u1", "u2", "u3", "u4")
    fake.script(Text("r5"))
    front.chat[1] = {"role": "assistant", "content": "r1, edited"}
    await front.send("u5")
    path = await path_texts(front.api, story)
    assert path[2] == ("reply", "r1, edited") and path[-2:] == [("user", "u5"), ("reply", "r5")]
    assert "r1, edited" in [m["content"] for m in fake.requests[-1]["messages"]]


async def test_a_cut_chat_that_keeps_the_greeting_and_opens_on_a_reply_is_recorded(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "u1", "u2", "u3", "u4", "u5")
    fake.script(Text("r6"))
    cut = [*front.messages()[:2], *front.chat[3:], {"role": "user", "content": "u6"}]  # greeting, then r2, u3…
    _, later = await front.complete(cut, stream=False)
    assert later["x-changji-recorded"] == "true" and later["x-changji-story"] == story
    assert (await path_texts(front.api, story))[-2:] == [("user", "u6"), ("reply", "r6")]


async def test_a_chat_without_a_greeting_whose_system_text_changes_stays_one_story(
    fake: FakeModelServer, front: Front
) -> None:
    base = "You are a ferry dispatcher on a foggy coast. Answer in a sentence or two, in character."
    chat: list[dict[str, str]] = []
    fake.script(*[Text(f"Dispatch {i}.") for i in range(4)])
    stories = set()
    for i in range(4):
        chat.append({"role": "user", "content": f"Question {i}?"})
        lore = {"role": "system", "content": f"{base}\n[Lore {i}: the {i}th buoy is out.]"}
        text, headers = await front.complete([lore, *chat], stream=False)
        chat.append({"role": "assistant", "content": text})
        stories.add(headers["x-changji-story"])
    assert len(stories) == 1


async def test_a_chat_from_its_greeting_with_its_first_reply_deleted_branches_from_the_greeting(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "u1", "u2", "u3")
    del front.chat[1]  # r1 deleted: u1 and u2 meet
    fake.script(Text("r4"))
    _, headers = await front.send("u4")
    assert headers["x-changji-story"] == story and headers["x-changji-recorded"] == "true"
    path = await path_texts(front.api, story)
    assert path == [
        ("greeting", GREETING), ("user", "u1\n\nu2"), ("reply", "r2"), ("user", "u3"), ("reply", "r3"),
        ("user", "u4"), ("reply", "r4"),
    ]  # fmt: skip


async def test_a_cut_chat_whose_oldest_message_a_reply_was_edited_branches_above_it(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "u1", "u2", "u3", "u4")
    cut = [{"role": "system", "content": SYSTEM}, *front_chat(4)[3:], {"role": "user", "content": "u5"}]
    cut[1] = {"role": "assistant", "content": "r2, edited"}  # the oldest message the front end still shows
    fake.script(Text("r5"))
    _, headers = await front.complete(cut, stream=False)
    assert headers["x-changji-story"] == story
    path = await path_texts(front.api, story)
    assert path[:5] == [
        ("greeting", GREETING),
        ("user", "u1"),
        ("reply", "r1"),
        ("user", "u2"),
        ("reply", "r2, edited"),
    ]
    assert path[-2:] == [("user", "u5"), ("reply", "r5")] and len(path) == 11


async def test_the_same_words_sent_twice_at_once_make_one_user_node_with_two_replies(
    fake: FakeModelServer, front: Front
) -> None:
    story = await front.play(fake, "u1")
    fake.script(Text("first"), Text("second"))
    messages = [*front.messages(), {"role": "user", "content": "u2"}]
    both = await asyncio.gather(front.complete(messages, False), front.complete(messages, False))
    assert {headers["x-changji-story"] for _, headers in both} == {story}
    replies = [await front.api.call("GET", f"/v1/nodes/{headers['x-changji-node']}") for _, headers in both]
    assert replies[0]["id"] != replies[1]["id"] and replies[0]["parent_id"] == replies[1]["parent_id"]
    siblings = await front.api.call("GET", f"/v1/nodes/{replies[0]['parent_id']}/siblings")
    assert [n["text"] for n in siblings["nodes"]] == ["u2"]  # one user node for the words, not two
