"""Which story a chat goes on in: cut to the front end's context, after a restart, its system text changed or shared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from api.app import create_app
from api.settings import Settings
from providers.fake_server import FakeModelServer, Text
from tests.builders import TENANT, api_for
from tests.e2e.conftest import ServiceTestServer
from tests.e2e.proxy_front_end.front_end import GREETING, SYSTEM, Front, front_chat, path_texts
from tests.fake_model import main_model


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
