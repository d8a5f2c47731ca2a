"""The proxy behind SillyTavern: the bodies its builder makes (`tests/sillytavern/`, checked against a real
1.12.6), cut to a small context so that a ten-turn chat has lost its greeting and its oldest messages. Each
thing a user does in SillyTavern ends as the right tree, before and after a restart of the service (the
proxy then knows the chat only from the tree), and the upstream gets no more tokens than SillyTavern sent,
changji's memory within them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from aiohttp.test_utils import TestClient

from api.app import create_app
from api.keys import SERVICE
from api.settings import Settings
from domain.tree.rules.reconcile import message_text
from projections.context.window import MESSAGE_OVERHEAD_TOKENS
from providers.fake_server import FakeModelServer, Status, Text
from tests.builders import TENANT, Api, api_for
from tests.e2e.conftest import ServiceTestServer
from tests.fake_model import main_model
from tests.shared_data import cards_dir
from tests.sillytavern.body import Generation, build_body
from tests.sillytavern.card import Card
from tests.sillytavern.settings import Settings as TavernSettings

pytestmark = pytest.mark.both_stores

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sillytavern"
SMALL_CONTEXT = 2000  # SillyTavern's context: by turn 7 the chat no longer fits, and it is cut
TURNS = 10
Chat = list[dict[str, str]]


@cache
def seraphina() -> Card:
    return Card.from_json(json.loads((cards_dir() / "default_Seraphina.card.json").read_text("utf-8")))


@cache
def chat1() -> tuple[dict[str, str], ...]:
    """A recorded SillyTavern chat: the greeting, then user words and replies one after the other."""
    return tuple(json.loads((FIXTURES / "chat1_history.json").read_text("utf-8")))


def history(end: int) -> Chat:
    return [dict(m) for m in chat1()[:end]]


def words(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def said(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


class Tavern:
    """SillyTavern on a service whose data dir outlives it: the body built from its whole chat, cut to
    its context, posted to the proxy as it would be."""

    def __init__(self, fake: FakeModelServer, data_dir: Path, **settings: Any) -> None:
        self.fake, self.data_dir, self.settings = fake, data_dir, settings
        self.client: TestClient[Any, Any] | None = None
        self.api: Api
        self.sent: dict[str, Any] = {}
        self.context = SMALL_CONTEXT

    async def start(self) -> None:
        settings = Settings(
            data_dir=self.data_dir, embedder="none", main_model=main_model(self.fake, max_retries=0), **self.settings
        )
        self.client = TestClient(ServiceTestServer(create_app(settings)))
        await self.client.start_server()
        self.api = api_for(self.client, TENANT)

    async def restart(self) -> None:
        """The service stopped and started again on its data dir: what the proxy knew is gone but the tree."""
        await self.close()
        await self.start()

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
            self.client = None

    def body(self, chat: Sequence[Mapping[str, str]], generation: Generation = "normal", **more: Any) -> dict[str, Any]:
        context, stream = more.pop("max_context", self.context), more.pop("stream", False)
        settings = TavernSettings(max_context=context, stream=stream)
        return build_body(seraphina(), chat, generation=generation, settings=settings, **more)

    async def post(self, body: Mapping[str, Any], status: int = 200) -> tuple[Any, dict[str, str]]:
        """The reply's text (streamed or not), or the error's JSON; and the headers."""
        self.sent = dict(body)
        async with self.api.client.post("/v1/chat/completions", json=body, headers=self.api.headers) as response:
            raw = await response.text()
            assert response.status == status, raw
            headers = dict(response.headers)
        if status != 200:
            return json.loads(raw), headers
        if not body.get("stream"):
            return json.loads(raw)["choices"][0]["message"]["content"] or "", headers
        chunks = [line[6:] for line in raw.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]
        deltas = [json.loads(chunk)["choices"] for chunk in chunks]
        return "".join(c[0]["delta"].get("content") or "" for c in deltas if c), headers

    async def send(
        self, chat: Sequence[Mapping[str, str]], reply: str, generation: Generation = "normal", **more: Any
    ) -> dict[str, str]:
        self.fake.script(Text(reply))
        text, headers = await self.post(self.body(chat, generation, **more))
        assert text == reply
        return headers

    async def play(self, turns: int) -> str:
        """The recorded chat's first turns, each answered with its recorded reply; the story's id."""
        stories = set()
        for turn in range(1, turns + 1):
            headers = await self.send(history(2 * turn), chat1()[2 * turn]["content"])
            assert headers["X-Changji-Recorded"] == "true"
            stories.add(headers["X-Changji-Story"])
        (story,) = stories
        return story

    def counted(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The tokens of messages, counted as the service counts a message (its text, and each message's
        overhead), with its tokenizer: as `ops/bench/proxy.py` counts what a client sent and the upstream got."""
        assert self.client is not None
        counter = self.client.app[SERVICE].counter
        return sum(counter.count(message_text(m.get("content"))) + MESSAGE_OVERHEAD_TOKENS for m in messages)

    # --- the story, read back -----------------------------------------------------------------------------

    async def path(self, story: str) -> list[dict[str, Any]]:
        return (await self.api.call("GET", f"/v1/stories/{story}/path?limit=10000"))["nodes"]  # type: ignore[no-any-return]

    async def chat_of(self, story: str) -> Chat:
        """The story's path as a chat (the greeting an assistant message)."""
        return [{"role": "user" if n["kind"] == "user" else "assistant", "content": n["text"]} for n in await self.path(story)]  # fmt: skip

    async def tree(self, story: str) -> dict[str, dict[str, Any]]:
        nodes = (await self.api.call("GET", f"/v1/stories/{story}/tree?limit=5000"))["nodes"]
        return {n["id"]: n for n in nodes}

    async def node(self, node_id: str) -> dict[str, Any]:
        return await self.api.call("GET", f"/v1/nodes/{node_id}")  # type: ignore[no-any-return]

    async def stories(self) -> list[str]:
        return [s["id"] for s in (await self.api.call("GET", "/v1/stories"))["items"]]


def was_cut(body: Mapping[str, Any]) -> bool:
    """Whether SillyTavern left the greeting out of the body (its context was full)."""
    return chat1()[0]["content"] not in [m["content"] for m in body["messages"]]


QUIET = {"job_sweep_seconds": 3600.0}  # no background job runs while a test does: no compaction lands mid-test


@pytest.fixture
async def tavern(fake: FakeModelServer, tmp_path: Path) -> AsyncIterator[Tavern]:
    played = Tavern(fake, tmp_path / "data", **QUIET)
    await played.start()
    yield played
    await played.close()


@pytest.fixture(params=[False, True], ids=["running", "restarted"])
async def story(request: pytest.FixtureRequest, tavern: Tavern) -> str:
    """Ten turns of the recorded chat, the last bodies cut; with the service restarted after them, or not."""
    story = await tavern.play(TURNS)
    assert was_cut(tavern.sent)
    if request.param:
        await tavern.restart()
    return story


async def test_a_chat_sillytavern_cuts_to_its_context_stays_one_story_message_for_message(tavern: Tavern) -> None:
    story = await tavern.play(TURNS)
    assert was_cut(tavern.sent) and len(tavern.sent["messages"]) < 2 * TURNS
    assert await tavern.chat_of(story) == history(2 * TURNS + 1)
    assert len(await tavern.tree(story)) == 2 * TURNS + 1 and await tavern.stories() == [story]


async def test_deleting_the_last_turn_and_sending_new_words_makes_a_sibling_of_the_deleted_words(
    tavern: Tavern, story: str
) -> None:
    path, tree = await tavern.path(story), await tavern.tree(story)
    deleted_words, deleted_reply = path[-2], path[-1]
    chat = [*history(2 * TURNS - 1), words('*I shake my head.* "Tell me about the forest instead."')]
    headers = await tavern.send(chat, '*Seraphina smiles.* "The forest is old."', stream=True)
    assert was_cut(tavern.sent) and headers["X-Changji-Story"] == story
    reply = await tavern.node(headers["X-Changji-Node"])
    new_words = await tavern.node(reply["parent_id"])
    assert new_words["parent_id"] == deleted_words["parent_id"]  # a sibling of the deleted words
    assert new_words["text"] == chat[-1]["content"] and new_words["id"] != deleted_words["id"]
    after = await tavern.tree(story)
    assert set(after) == set(tree) | {reply["id"], new_words["id"]}  # nothing else added, nothing lost
    assert {deleted_words["id"], deleted_reply["id"]} <= set(after)
    assert await tavern.chat_of(story) == [*chat, said(reply["text"])]


async def test_a_regenerate_after_sillytavern_deleted_the_reply_is_a_sibling_reply(tavern: Tavern, story: str) -> None:
    path, tree = await tavern.path(story), await tavern.tree(story)
    headers = await tavern.send(history(2 * TURNS + 1), "*She pours more tea.*", generation="regenerate")
    assert was_cut(tavern.sent) and headers["X-Changji-Story"] == story
    reply = await tavern.node(headers["X-Changji-Node"])
    assert reply["parent_id"] == path[-2]["id"] and reply["id"] != path[-1]["id"]
    assert set(await tavern.tree(story)) == set(tree) | {reply["id"]}
    siblings = await tavern.api.call("GET", f"/v1/nodes/{reply['id']}/siblings")
    assert sorted(n["text"] for n in siblings["nodes"]) == sorted([path[-1]["text"], "*She pours more tea.*"])


async def test_a_swipe_of_the_last_reply_is_a_sibling_reply_and_the_leaf(tavern: Tavern, story: str) -> None:
    path, tree = await tavern.path(story), await tavern.tree(story)
    headers = await tavern.send(history(2 * TURNS + 1), "*She hums.*", generation="swipe", stream=True)
    assert was_cut(tavern.sent) and headers["X-Changji-Story"] == story
    reply = await tavern.node(headers["X-Changji-Node"])
    assert reply["parent_id"] == path[-2]["id"] and set(await tavern.tree(story)) == set(tree) | {reply["id"]}
    assert await tavern.chat_of(story) == [*history(2 * TURNS), said("*She hums.*")]


@pytest.mark.parametrize("back", [3, 4, 5], ids=["words-3-back", "reply-4-back", "words-5-back"])
async def test_an_edit_some_messages_back_branches_from_the_message_before_it(
    tavern: Tavern, story: str, back: int
) -> None:
    """`back`: how far from the end of the chat sent (the new words last) the edited message is."""
    path, tree = await tavern.path(story), await tavern.tree(story)
    chat = [*history(2 * TURNS + 1), words("*I stand up slowly.*")]
    at = len(chat) - back
    chat[at] = {**chat[at], "content": chat[at]["content"] + " (edited)"}
    headers = await tavern.send(chat, "*She steadies you.*")
    assert was_cut(tavern.sent) and chat[at]["content"] in [m["content"] for m in tavern.sent["messages"]]
    assert headers["X-Changji-Story"] == story
    assert await tavern.chat_of(story) == [*chat, said("*She steadies you.*")]
    after = await tavern.tree(story)
    added = {n: after[n] for n in set(after) - set(tree)}
    assert set(tree) <= set(after) and len(added) == back + 1  # the edited message, those after it, a reply
    (edited,) = [n for n in added.values() if n["depth"] == at]
    assert edited["parent_id"] == path[at - 1]["id"]  # the branch hangs from the message before the edit


async def test_an_edit_of_the_oldest_message_sillytaverns_body_shows_branches_from_the_one_before_it(
    tavern: Tavern, story: str
) -> None:
    path, tree = await tavern.path(story), await tavern.tree(story)
    chat = [*history(2 * TURNS + 1), words("*I stand up slowly.*")]
    shown = [m["content"] for m in tavern.body(chat)["messages"]]
    oldest = next(i for i, m in enumerate(chat) if m["content"] in shown)
    chat[oldest] = {**chat[oldest], "content": "*Edited.*"}  # (shorter: it stays in the body)
    headers = await tavern.send(chat, "*She steadies you.*")
    assert "*Edited.*" in [m["content"] for m in tavern.sent["messages"]] and was_cut(tavern.sent)
    assert headers["X-Changji-Story"] == story
    assert await tavern.chat_of(story) == [*chat, said("*She steadies you.*")]
    after = await tavern.tree(story)
    (edited,) = [after[n] for n in set(after) - set(tree) if after[n]["depth"] == oldest]
    assert edited["parent_id"] == path[oldest - 1]["id"] and len(after) == len(tree) + len(chat) - oldest + 1


NUDGE = "[Continue your last message without repeating its original content.]"


@pytest.mark.parametrize(
    ("nudge", "words", "joined"),
    [
        ("sillytavern", "She laughs softly.", " She laughs softly."),  # joined with a space, as SillyTavern shows it
        ("sillytavern", " She laughs softly.", " She laughs softly."),
        (NUDGE, "She laughs softly.", " She laughs softly."),
        (None, " She laughs softly.", " She laughs softly."),  # the chat ends with the reply: it goes on as written
        (None, "softly.", "softly."),
    ],
    ids=["sillytavern-nudge", "sillytavern-nudge-spaced", "other-nudge", "no-nudge", "no-nudge-unspaced"],
)
async def test_a_continue_extends_the_reply_without_a_new_node(
    tavern: Tavern, story: str, nudge: str | None, words: str, joined: str
) -> None:
    path, tree = await tavern.path(story), await tavern.tree(story)
    body = tavern.body(history(2 * TURNS + 1), "continue", stream=True)
    if nudge != "sillytavern":
        body["messages"] = body["messages"][:-1] + ([{"role": "system", "content": nudge}] if nudge else [])
    tavern.fake.script(Text(words))
    text, headers = await tavern.post(body)
    assert text == words and headers["X-Changji-Story"] == story
    assert headers["X-Changji-Recorded"] == "true" and headers["X-Changji-Node"] == path[-1]["id"]
    reply = await tavern.node(path[-1]["id"])
    assert reply["text"] == path[-1]["text"] + joined
    assert set(await tavern.tree(story)) == set(tree)


async def test_a_second_chat_with_the_same_greeting_and_first_words_is_a_new_story_and_the_long_one_goes_on(
    tavern: Tavern, story: str
) -> None:
    leaf = (await tavern.path(story))[-1]["id"]
    second = history(2)  # the same greeting, the same first words
    headers = await tavern.send(second, '*She blinks.* "You again?"')
    other = headers["X-Changji-Story"]
    assert other != story and sorted(await tavern.stories()) == sorted([story, other])
    second += [said('*She blinks.* "You again?"'), words("*I nod.*")]
    headers = await tavern.send(second, "*She sighs.*")
    assert headers["X-Changji-Story"] == other
    assert await tavern.chat_of(other) == [*second, said("*She sighs.*")]
    assert (await tavern.path(story))[-1]["id"] == leaf  # the long story did not move
    long = [*history(2 * TURNS + 1), words("*I look out of the window.*")]
    headers = await tavern.send(long, "*Rain falls.*")  # back to the long chat, cut
    assert was_cut(tavern.sent) and headers["X-Changji-Story"] == story
    assert await tavern.chat_of(story) == [*long, said("*Rain falls.*")]
    assert len(await tavern.tree(other)) == 5 and len(await tavern.stories()) == 2


async def test_a_second_chat_of_the_card_with_other_first_words_is_a_new_story(tavern: Tavern, story: str) -> None:
    leaf = (await tavern.path(story))[-1]["id"]
    second = [*history(1), words('*I blink up at her, still dazed.* "You found me?"')]
    headers = await tavern.send(second, "*She nods.*", stream=True)
    other = headers["X-Changji-Story"]
    assert other != story and await tavern.chat_of(other) == [*second, said("*She nods.*")]
    second += [said("*She nods.*"), words("*I sip the tea.*")]
    assert (await tavern.send(second, "*She smiles.*"))["X-Changji-Story"] == other
    assert (await tavern.path(story))[-1]["id"] == leaf and len(await tavern.stories()) == 2


async def test_lore_that_comes_into_a_cut_chat_does_not_make_another_story(tavern: Tavern, story: str) -> None:
    lore = json.loads((FIXTURES / "chat1_turn27.json").read_text("utf-8"))["messages"][1]["content"]
    chat = [*history(2 * TURNS + 1), words("*I ask about her magic.*")]
    tavern.fake.script(Text("*Light gathers in her palm.*"))
    body = tavern.body(chat, world_info_before=lore, max_context=2600)  # (the lore leaves room for 11 messages)
    _, headers = await tavern.post(body)
    assert lore in [m["content"] for m in tavern.sent["messages"]] and was_cut(tavern.sent)
    assert headers["X-Changji-Story"] == story and await tavern.stories() == [story]
    assert (await tavern.path(story))[-2]["text"] == "*I ask about her magic.*"


async def test_words_sent_after_a_failed_request_make_one_turn_and_nothing_of_the_failure_stays(
    tavern: Tavern, story: str
) -> None:
    tree = await tavern.tree(story)
    failed = [*history(2 * TURNS + 1), words("Are you there?")]
    tavern.fake.script(Status(502))
    error, _ = await tavern.post(tavern.body(failed, stream=True), status=502)
    assert "failed (502)" in error["error"]["message"] and await tavern.tree(story) == tree
    chat = [*failed, words("Hello?")]  # SillyTavern kept the words that failed; the user sent more
    headers = await tavern.send(chat, "*She looks up.*")
    assert was_cut(tavern.sent) and headers["X-Changji-Story"] == story
    after = await tavern.tree(story)
    added = [await tavern.node(node) for node in set(after) - set(tree)]
    assert [n["text"] for n in added if n["kind"] == "reply"] == ["*She looks up.*"]
    said_words = " ".join(n["text"] for n in sorted(added, key=lambda n: n["depth"]) if n["kind"] == "user")
    assert said_words.split() == ["Are", "you", "there?", "Hello?"]  # one turn, or two user nodes, for both
    assert (await tavern.path(story))[-1]["text"] == "*She looks up.*"


# --- the client's budget ------------------------------------------------------------------------------------


async def test_the_upstream_never_gets_more_tokens_than_sillytavern_sent(fake: FakeModelServer, tavern: Tavern) -> None:
    for turn in range(1, TURNS + 2):
        await tavern.send(history(2 * turn), chat1()[2 * turn]["content"])
        client, upstream = tavern.counted(tavern.sent["messages"]), tavern.counted(fake.requests[-1]["messages"])
        assert upstream <= client, (turn, upstream, client)
    assert was_cut(tavern.sent)


async def test_the_clients_small_budget_announces_no_pack_of_its_own(tavern: Tavern) -> None:
    story = await tavern.play(TURNS)  # (the story's own window, 32,768 tokens, holds all of it)
    assert was_cut(tavern.sent)  # SillyTavern cut its chat: its budget leaves turns out at every reply
    jobs = (await tavern.api.call("GET", f"/v1/jobs?story_id={story}&kind=compact"))["items"]
    assert "budget" not in {job["detail"] for job in jobs}, jobs  # the story's own pace packs, not a turn a time


async def compacted(tavern: Tavern, turns: int) -> str:
    """A story of the recorded chat's first turns, compacted but for its last two."""
    story = await tavern.play(turns)
    card = (await tavern.api.call("GET", f"/v1/stories/{story}"))["card_id"]
    settings = {"keep_turns": 2, "pack_turns": 3, "min_pack_chars": 0, "episodes_kept": 1}
    await tavern.api.call("PATCH", f"/v1/cards/{card}", {"settings": settings})
    await tavern.api.call("POST", f"/v1/stories/{story}/compact", {})
    return story


async def test_a_compacted_story_never_sends_more_tokens_than_sillytavern_did(
    fake: FakeModelServer, tavern: Tavern
) -> None:
    await compacted(tavern, TURNS)
    await tavern.send([*history(2 * TURNS + 1), words("*I ask what happened to me.*")], "*She tells you.*")
    assert was_cut(tavern.sent)
    assert tavern.counted(fake.requests[-1]["messages"]) <= tavern.counted(tavern.sent["messages"])


async def test_a_compacted_story_sends_its_summary_within_what_sillytavern_sent(
    fake: FakeModelServer, tavern: Tavern
) -> None:
    tavern.context = 4095  # SillyTavern's default: the chat is cut from turn 21 on
    story = await compacted(tavern, 2 * TURNS + 2)
    asked = [*history(4 * TURNS + 5), words("*I ask what happened to me.*")]
    await tavern.send(asked, "*She tells you.*")
    sent = fake.requests[-1]["messages"]
    assert was_cut(tavern.sent) and tavern.counted(sent) <= tavern.counted(tavern.sent["messages"])
    assert any(m["role"] == "user" and m["content"].startswith("[Story so far]") for m in sent)
    assert sent[-1]["content"].endswith("*I ask what happened to me.*")
    assert len(await tavern.path(story)) == len(asked) + 1


@pytest.mark.parametrize(
    ("service", "story_rule", "more"),
    [("story", None, True), ("client", "story", True), ("story", "client", False), ("client", None, False)],
    ids=["service-story", "story-over-client", "client-over-story", "client"],
)
async def test_the_storys_window_decides_when_the_settings_say_so(
    fake: FakeModelServer, tmp_path: Path, service: str, story_rule: str | None, more: bool
) -> None:
    tavern = Tavern(fake, tmp_path / "data", proxy_budget=service, **QUIET)
    await tavern.start()
    try:
        story = await tavern.play(TURNS)
        if story_rule is not None:
            await tavern.api.call("PATCH", f"/v1/stories/{story}", {"settings": {"proxy_budget": story_rule}})
        await tavern.send([*history(2 * TURNS + 1), words("*I ask about the bridge.*")], "*She points east.*")
        sent, upstream = tavern.sent["messages"], fake.requests[-1]["messages"]
        assert was_cut(tavern.sent)
        greeting = chat1()[0]["content"]
        assert (tavern.counted(upstream) > tavern.counted(sent)) is more
        assert any(greeting in message_text(m["content"]) for m in upstream) is more  # the story from its start
    finally:
        await tavern.close()


async def test_the_card_the_proxy_made_merged_into_the_imported_card_brings_its_story_and_its_next_chats(
    tavern: Tavern, story: str
) -> None:
    made = (await tavern.api.call("GET", f"/v1/stories/{story}"))["card_id"]
    raw = (cards_dir() / "default_Seraphina.card.json").read_bytes()
    imported = (await tavern.api.send("POST", "/v1/cards/import", raw))["id"]
    merged = await tavern.api.call("POST", f"/v1/cards/{made}/merge", json={"into": imported})
    assert merged["stories_moved"] == 1 and merged["card"]["id"] == imported
    assert (await tavern.api.call("GET", f"/v1/stories/{story}"))["card_id"] == imported
    gone = await tavern.api.call("GET", f"/v1/cards/{made}", status=404)
    assert f"merged into card {imported}" in gone["detail"]
    assert [c["id"] for c in (await tavern.api.call("GET", "/v1/cards"))["items"]] == [imported]
    long = [*history(2 * TURNS + 1), words("*I look out of the window.*")]
    headers = await tavern.send(long, "*Rain falls.*")  # the cut chat goes on in its story
    assert headers["X-Changji-Story"] == story and await tavern.chat_of(story) == [*long, said("*Rain falls.*")]
    second = [*history(1), words('*I blink up at her, still dazed.* "You found me?"')]
    other = (await tavern.send(second, "*She nods.*"))["X-Changji-Story"]  # a new chat: on the imported card
    assert other != story and (await tavern.api.call("GET", f"/v1/stories/{other}"))["card_id"] == imported
    assert [c["id"] for c in (await tavern.api.call("GET", "/v1/cards"))["items"]] == [imported]
    again = await tavern.api.call("POST", f"/v1/cards/{made}/merge", json={"into": imported})
    assert again["stories_moved"] == 0  # (asked again: nothing left to move)


async def test_a_merge_refuses_what_it_cannot_do_by_the_field_at_fault(tavern: Tavern) -> None:
    first = (await tavern.api.call("POST", "/v1/cards", json={"card": {"name": "Mira"}}, status=201))["id"]
    second = (await tavern.api.call("POST", "/v1/cards", json={"card": {"name": "Mira (imported)"}}, status=201))["id"]
    third = (await tavern.api.call("POST", "/v1/cards", json={"card": {"name": "Oren"}}, status=201))["id"]
    itself = await tavern.api.call("POST", f"/v1/cards/{first}/merge", json={"into": first}, status=422)
    assert itself["errors"][0]["field"] == "body.into"
    nowhere = await tavern.api.call("POST", f"/v1/cards/{first}/merge", json={"into": str(uuid4())}, status=404)
    assert nowhere["errors"][0]["field"] == "body.into"
    unread = await tavern.api.call("POST", f"/v1/cards/{first}/merge", json={"into": "Mira"}, status=422)
    assert unread["errors"][0]["field"] == "body.into"
    await tavern.api.call("POST", f"/v1/cards/{first}/merge", json={"into": second})
    elsewhere = await tavern.api.call("POST", f"/v1/cards/{first}/merge", json={"into": third}, status=422)
    assert elsewhere["errors"][0]["field"] == "body.into" and second in elsewhere["detail"]
    into_merged = await tavern.api.call("POST", f"/v1/cards/{third}/merge", json={"into": first}, status=404)
    assert into_merged["errors"][0]["field"] == "body.into"


async def test_a_new_chat_after_the_card_the_proxy_made_was_deleted_makes_a_card_again(tavern: Tavern) -> None:
    first = [*history(1), words('*I blink up at her, still dazed.* "You found me?"')]
    story = (await tavern.send(first, "*She nods.*"))["X-Changji-Story"]
    made = (await tavern.api.call("GET", f"/v1/stories/{story}"))["card_id"]
    await tavern.api.call("DELETE", f"/v1/cards/{made}", status=204)
    second = [*history(1), words('*I try to sit up.* "Where am I?"')]
    other = (await tavern.send(second, '*She steadies you.* "Safe."'))["X-Changji-Story"]
    again = (await tavern.api.call("GET", f"/v1/stories/{other}"))["card_id"]
    assert other != story and again != made
    assert [c["id"] for c in (await tavern.api.call("GET", "/v1/cards"))["items"]] == [again]
    third = [*history(1), words('*I look around the glade.* "Is it morning?"')]  # (the card made again is used)
    assert (await tavern.api.call("GET", f"/v1/stories/{(await tavern.send(third, '*Yes.*'))['X-Changji-Story']}"))[
        "card_id"
    ] == again
