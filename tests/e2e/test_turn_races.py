"""Races around a turn's start: reads right after the stream opens, and stops before the task runs."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest
from aiohttp.test_utils import TestClient

from api.keys import SERVICE
from providers.fake_server import FakeModelServer, Text
from tests.builders import TENANT, Api
from tests.fake_model import ask, calls, node

pytestmark = pytest.mark.both_stores


async def test_tree_shows_the_turns_nodes_as_soon_as_its_stream_starts(
    engine: Api, engine_story: dict[str, Any], fake: FakeModelServer
) -> None:
    fake.script(Text("慢慢地说。", delay=0.5))
    sid = engine_story["id"]
    headers = {**engine.headers, "Accept": "text/event-stream"}
    async with engine.client.post(f"/v1/stories/{sid}/turns", json={"text": "你好"}, headers=headers) as response:
        first = await response.content.readline()
        assert first.startswith(b"event:")
        tree = await engine.call("GET", f"/v1/stories/{sid}/tree")
        assert [n["kind"] for n in tree["nodes"]][-2:] == ["user", "reply"]
        await response.read()


async def test_a_turn_stopped_before_it_runs_ends_stopped_with_its_stream_closed(
    engine: Api, engine_story: dict[str, Any]
) -> None:
    client: TestClient[Any, Any] = engine.client
    svc = client.app[SERVICE]  # type: ignore[index]
    assert svc.turns is not None
    story_id = UUID(engine_story["id"])
    reply = (
        await svc.executor.command(
            svc.app.turns.open_turn, TENANT, story_id, uuid4(), uuid4(), "你好", None, "fake-main"
        )
    ).reply
    handle = svc.turns.start(TENANT, story_id, reply.id)
    assert svc.turns.stop(reply.id)
    kinds = []
    while (event := await handle.events.get()).kind != "done":
        kinds.append(event.kind)
    assert kinds == ["stopped"]
    assert handle.late_stop is not None
    await handle.late_stop
    assert (await node(engine, str(reply.id)))["phase"] == "stopped"


async def test_a_stop_racing_an_answer_stops_the_resumed_turn(
    engine: Api, engine_story: dict[str, Any], fake: FakeModelServer
) -> None:
    fake.script(calls(ask("去哪？", "北", "南")), Text("不该被调用。", delay=0.5))
    asked = await engine.call("POST", f"/v1/stories/{engine_story['id']}/turns", {"text": "问我"}, 201)
    reply_id = asked["reply"]["id"]
    svc = engine.client.app[SERVICE]  # type: ignore[index]
    handle = svc.turns.start(TENANT, UUID(engine_story["id"]), UUID(reply_id), answer="南")
    stopped = await engine.call("POST", f"/v1/nodes/{reply_id}/stop")
    assert stopped["was_running"] is True
    assert stopped["reply"]["phase"] == "stopped"
    while (await handle.events.get()).kind != "done":
        pass


async def test_a_second_answer_while_the_first_runs_is_refused_and_the_turn_goes_on(
    engine: Api, engine_story: dict[str, Any], fake: FakeModelServer
) -> None:
    fake.script(calls(ask("去哪？", "北", "南")), Text("向南走。", delay=0.3))
    asked = await engine.call("POST", f"/v1/stories/{engine_story['id']}/turns", {"text": "问我"}, 201)
    reply_id = asked["reply"]["id"]
    svc = engine.client.app[SERVICE]  # type: ignore[index]
    first = svc.turns.start(TENANT, UUID(engine_story["id"]), UUID(reply_id), answer="南")
    refused = await engine.call("POST", f"/v1/nodes/{reply_id}/answer", {"answer": "北"}, 422)
    assert refused["status"] == 422
    while (await first.events.get()).kind != "done":
        pass
    assert (await node(engine, reply_id))["phase"] == "sealed"
