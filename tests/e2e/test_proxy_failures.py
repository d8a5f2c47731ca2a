"""A proxied request the upstream fails records nothing: no reply, no story; the error says what happened,
and `/v1/models` fails too. Once the upstream answers, the same request goes on as if nothing had failed."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from api.app import create_app
from api.settings import ModelSettings, Settings
from providers.fake_server import Drop, FakeModelServer, Status, Text
from tests.builders import TENANT, Api, MakeClient, api_for
from tests.e2e.conftest import ServiceTestServer
from tests.fake_model import MAIN_MODEL, MakeEngine

MESSAGES = [
    {"role": "system", "content": "You are Mira, a ferry pilot."},
    {"role": "assistant", "content": "The ferry horn sounds."},
    {"role": "user", "content": "Is there room for one more?"},
]


def closed_port() -> int:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        return int(held.getsockname()[1])


async def served(tmp_path: Path, base_url: str) -> Api:
    model = ModelSettings(base_url=base_url, model="fake-model", max_retries=0, read_timeout=5.0)
    app = create_app(Settings(data_dir=tmp_path / "data", embedder="none", main_model=model))
    client: TestClient[Any, Any] = TestClient(ServiceTestServer(app))
    await client.start_server()
    return api_for(client, TENANT)


async def post(api: Api, stream: bool) -> tuple[int, dict[str, Any] | str, dict[str, str]]:
    body = {"model": "fake-model", "messages": MESSAGES, "stream": stream}
    async with api.client.post("/v1/chat/completions", json=body, headers=api.headers) as response:
        data = await response.json() if response.content_type == "application/json" else await response.text()
        return response.status, data, dict(response.headers)


async def test_an_upstream_that_cannot_be_reached_leaves_no_story_and_says_so(tmp_path: Path) -> None:
    api = await served(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")
    try:
        for stream in (False, True):
            status, data, headers = await post(api, stream)
            assert status == 502 and isinstance(data, dict)
            assert "could not be reached" in data["error"]["message"] and "X-Changji-Story" not in headers
        assert (await api.call("GET", "/v1/stories"))["items"] == []
        async with api.client.get("/v1/models", headers=api.headers) as response:
            assert response.status == 502
            assert "could not be reached" in (await response.json())["error"]["message"]
    finally:
        await api.client.close()


async def test_a_5xx_records_nothing_and_the_retry_goes_on_as_if_it_had_not_failed(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    api = await served(tmp_path, fake.url)
    try:
        fake.script(Status(503))
        status, data, _ = await post(api, False)
        assert status == 502 and isinstance(data, dict)
        assert "failed (503): scripted 503" in data["error"]["message"]  # with what the upstream said
        assert (await api.call("GET", "/v1/stories"))["items"] == []
        fake.script(Text("'Climb aboard.'"))
        status, data, headers = await post(api, False)
        assert status == 200 and headers["X-Changji-Recorded"] == "true"
        path = await api.call("GET", f"/v1/stories/{headers['X-Changji-Story']}/path?limit=100")
        assert [(n["kind"], n["text"]) for n in path["nodes"]] == [
            ("greeting", "The ferry horn sounds."), ("user", "Is there room for one more?"), ("reply", "'Climb aboard.'"),
        ]  # fmt: skip
        listed = (await api.call("GET", "/v1/stories"))["items"]
        assert len(listed) == 1 and listed[0]["relayed"] is True  # (a front end's chat: the web page reads it only)
        assert (await api.call("GET", f"/v1/stories/{headers['X-Changji-Story']}"))["relayed"] is True
        own = await api.story()
        assert own["relayed"] is False and (await api.call("GET", f"/v1/stories/{own['id']}"))["relayed"] is False
    finally:
        await api.client.close()


# --- a story the upstream fails in, and its requests of every kind -------------------------------------

SYSTEM = "You are Mira, a ferry pilot on a foggy coast. Stay in character."
GREETING = "The ferry horn sounds. 'Last crossing tonight,' Mira says."
Messages = list[dict[str, str]]


def chat(*said: str) -> Messages:
    """The system prompt, the greeting, then `said` as user words and replies one after the other."""
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(said)]
    return [{"role": "system", "content": SYSTEM}, {"role": "assistant", "content": GREETING}, *turns]


async def ask(api: Api, messages: Sequence[Mapping[str, Any]], stream: bool) -> tuple[int, Any, dict[str, str]]:
    """The status, the answer (the reply's text, streamed or not; the error's JSON) and the headers."""
    body = {"model": "fake-model", "messages": messages, "stream": stream}
    async with api.client.post("/v1/chat/completions", json=body, headers=api.headers) as response:
        raw, headers = await response.text(), dict(response.headers)
    if response.status != 200:
        return response.status, json.loads(raw), headers
    if not stream:
        return 200, json.loads(raw)["choices"][0]["message"]["content"], headers
    deltas = [json.loads(line[6:])["choices"] for line in raw.splitlines() if line.startswith("data: {")]
    return 200, "".join(c[0]["delta"].get("content") or "" for c in deltas if c), headers


def assert_openai_error(answer: Any, headers: Mapping[str, str], message: str, code: str) -> None:
    assert headers["Content-Type"].startswith("application/json")
    assert set(answer) == {"error"} and set(answer["error"]) == {"message", "type", "param", "code"}
    assert message in answer["error"]["message"], answer
    assert answer["error"]["type"] == "api_error" and answer["error"]["code"] == code


async def stories(api: Api) -> list[str]:
    return [s["id"] for s in (await api.call("GET", "/v1/stories"))["items"]]


async def tree(api: Api, story: str) -> dict[str, tuple[str | None, str, str]]:
    """Each node's parent, kind and text."""
    nodes = (await api.call("GET", f"/v1/stories/{story}/tree?limit=5000"))["nodes"]
    texts = {n["id"]: (await api.call("GET", f"/v1/nodes/{n['id']}"))["text"] for n in nodes}
    return {n["id"]: (n["parent_id"], n["kind"], texts[n["id"]]) for n in nodes}


async def path(api: Api, story: str) -> list[tuple[str, str]]:
    nodes = (await api.call("GET", f"/v1/stories/{story}/path?limit=10000"))["nodes"]
    return [(n["kind"], n["text"]) for n in nodes]


async def unreachable(make_client: MakeClient, port: int) -> Api:
    """A service whose main model is on `port`, without retries."""
    upstream = ModelSettings(base_url=f"http://127.0.0.1:{port}/v1", model=MAIN_MODEL, max_retries=0)
    return api_for(await make_client(main_model=upstream, embedder="none"), TENANT)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_first_request_the_upstream_cannot_answer_makes_no_story_and_then_starts_one(
    make_client: MakeClient, stream: bool
) -> None:
    port = closed_port()
    api = await unreachable(make_client, port)
    status, answer, headers = await ask(api, chat("Is there room for one more?"), stream)
    assert status == 502 and "X-Changji-Story" not in headers
    assert_openai_error(answer, headers, "the upstream model could not be reached", "upstream_unreachable")
    assert await stories(api) == []
    async with FakeModelServer(port=port) as fake:  # the upstream is up again
        fake.script(Text("'Climb aboard.'"))
        status, answer, headers = await ask(api, chat("Is there room for one more?"), stream)
    assert status == 200 and headers["X-Changji-Recorded"] == "true"
    assert await stories(api) == [headers["X-Changji-Story"]]
    assert await path(api, headers["X-Changji-Story"]) == [
        ("greeting", GREETING), ("user", "Is there room for one more?"), ("reply", "'Climb aboard.'"),
    ]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_turn_the_upstream_cannot_answer_leaves_the_story_as_it_was(
    make_client: MakeClient, stream: bool
) -> None:
    port = closed_port()
    api = await unreachable(make_client, port)
    async with FakeModelServer(port=port) as fake:
        fake.script(Text("r1"))
        _, _, headers = await ask(api, chat("u1"), stream=False)
    story = headers["X-Changji-Story"]
    before = await tree(api, story)
    status, answer, headers = await ask(api, chat("u1", "r1", "u2"), stream)  # the upstream is down
    assert status == 502
    assert_openai_error(answer, headers, "the upstream model could not be reached", "upstream_unreachable")
    assert await tree(api, story) == before and await stories(api) == [story]
    async with FakeModelServer(port=port) as fake:
        fake.script(Text("r2"))
        status, text, headers = await ask(api, chat("u1", "r1", "u2"), stream)
    assert status == 200 and text == "r2" and headers["X-Changji-Story"] == story
    after = await tree(api, story)
    (leaf,) = set(before) - {parent for parent, _, _ in before.values()}  # (the tree was one path)
    assert [node for node in after.values() if node[1:] == ("user", "u2")] == [(leaf, "user", "u2")]
    assert len(after) == len(before) + 2 and (await path(api, story))[-2:] == [("user", "u2"), ("reply", "r2")]


async def test_the_models_list_is_a_502_in_openais_shape_while_the_upstream_cannot_be_reached(
    make_client: MakeClient,
) -> None:
    port = closed_port()
    api = await unreachable(make_client, port)
    async with api.client.get("/v1/models", headers=api.headers) as response:
        answer, headers = await response.json(), dict(response.headers)
    assert response.status == 502
    assert_openai_error(answer, headers, "the upstream model could not be reached", "upstream_unreachable")
    async with FakeModelServer(port=port), api.client.get("/v1/models", headers=api.headers) as response:
        listed = await response.json()
    assert response.status == 200 and [m["id"] for m in listed["data"]] == ["fake-model"]


# --- an upstream that answers 5xx -------------------------------------------------------------------------

STORY = ("u1", "r1", "u2", "r2")
REQUESTS: dict[str, tuple[str, ...]] = {
    "new words": (*STORY, "u3"),
    "swipe": STORY[:3],  # the same chat again, ending with the user's words
    "edit": ("u1", "r1", "u2, edited", "r2", "u3"),
    "continue": STORY,  # the chat ends with the reply
}
ANSWERED: dict[str, tuple[str, ...]] = {  # the path once the upstream answers the request
    "new words": (*STORY, "u3", "r3"),
    "swipe": (*STORY[:3], "r3"),
    "edit": ("u1", "r1", "u2, edited", "r2", "u3", "r3"),
    "continue": (*STORY[:3], "r2 went on"),
}
GROWS = {"new words": 2, "swipe": 1, "edit": 4, "continue": 0}  # nodes the request adds once answered


@pytest.fixture
async def engine_without_retries(make_engine: MakeEngine) -> Api:
    return await make_engine(max_retries=0, embedder="none")


async def two_turns(api: Api, fake: FakeModelServer) -> str:
    """A story of STORY's two turns, played through the proxy; its id."""
    fake.script(Text("r1"), Text("r2"))
    await ask(api, chat("u1"), stream=False)
    _, _, headers = await ask(api, chat(*STORY[:3]), stream=False)
    return str(headers["X-Changji-Story"])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", list(REQUESTS))
async def test_a_request_the_upstream_fails_adds_nothing_and_then_goes_on_as_if_it_had_not_failed(
    fake: FakeModelServer, engine_without_retries: Api, kind: str, stream: bool
) -> None:
    api = engine_without_retries
    story = await two_turns(api, fake)
    before, asked = await tree(api, story), len(fake.requests)
    fake.script(Status(503))
    status, answer, headers = await ask(api, chat(*REQUESTS[kind]), stream)
    assert status == 502 and len(fake.requests) == asked + 1  # (no retries: one call, failed)
    assert_openai_error(answer, headers, "the upstream model failed (503): scripted 503", "upstream_error")
    assert await tree(api, story) == before and await stories(api) == [story]
    fake.script(Text(" went on" if kind == "continue" else "r3"))
    status, _, headers = await ask(api, chat(*REQUESTS[kind]), stream)
    assert status == 200 and headers["X-Changji-Story"] == story and headers["X-Changji-Recorded"] == "true"
    after = await tree(api, story)
    assert len(after) == len(before) + GROWS[kind] and set(before) <= set(after)
    assert [text for _, text in await path(api, story)] == [GREETING, *ANSWERED[kind]]
    words = [(parent, text) for parent, node, text in after.values() if node == "user"]
    assert len(words) == len(set(words))  # no words twice under one node


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_new_chat_whose_first_answer_fails_makes_no_story(
    fake: FakeModelServer, engine_without_retries: Api, stream: bool
) -> None:
    api = engine_without_retries
    fake.script(Status(500))
    status, answer, headers = await ask(api, chat("Is there room for one more?"), stream)
    assert status == 502 and "X-Changji-Story" not in headers
    assert_openai_error(answer, headers, "the upstream model failed (500): scripted 500", "upstream_error")
    assert await stories(api) == []
    fake.script(Text("'Climb aboard.'"))
    status, _, headers = await ask(api, chat("Is there room for one more?"), stream)
    assert status == 200 and await stories(api) == [headers["X-Changji-Story"]]
    assert len(await tree(api, headers["X-Changji-Story"])) == 3


# --- an upstream that breaks off after a chunk that says nothing --------------------------------------


async def test_a_stream_that_breaks_off_after_its_role_alone_records_nothing_and_says_so(
    fake: FakeModelServer, engine_without_retries: Api
) -> None:
    api = engine_without_retries
    story = await two_turns(api, fake)
    before = await tree(api, story)
    fake.script(Drop([]))  # the role chunk, then the connection cut
    status, answer, headers = await ask(api, chat(*STORY, "u3"), stream=True)
    assert status == 502 and "X-Changji-Story" not in headers
    assert_openai_error(answer, headers, "the upstream model broke off", "upstream_error")
    assert await tree(api, story) == before  # no empty stopped reply, no user node
    fake.script(Text("r3"))
    status, text, headers = await ask(api, chat(*STORY, "u3"), stream=True)
    assert status == 200 and text == "r3" and headers["X-Changji-Story"] == story
    assert len(await tree(api, story)) == len(before) + 2
    assert [text for _, text in await path(api, story)] == [GREETING, *STORY, "u3", "r3"]


async def test_a_stream_that_breaks_off_after_its_role_alone_is_tried_again(
    fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    api = await make_engine(max_retries=1, embedder="none")
    fake.script(Drop([]), Text("'Climb aboard.'"))
    status, text, headers = await ask(api, chat("Is there room for one more?"), stream=True)
    assert status == 200 and text == "'Climb aboard.'" and len(fake.requests) == 2
    assert await stories(api) == [headers["X-Changji-Story"]]
    assert [kind for kind, _ in await path(api, headers["X-Changji-Story"])] == ["greeting", "user", "reply"]
