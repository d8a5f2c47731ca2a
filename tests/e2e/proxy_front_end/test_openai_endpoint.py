"""The proxy as an OpenAI endpoint: models and errors in its shape, browsers of an allowed origin, abandoned streams."""

from __future__ import annotations

import asyncio

import openai
import pytest

from providers.fake_server import FakeModelServer, Status, Text
from tests.e2e.proxy_front_end.front_end import GREETING, Front, client_for
from tests.fake_model import MakeEngine


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
