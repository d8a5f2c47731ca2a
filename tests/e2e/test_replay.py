"""Replay: the events of a path in order, root → at, with the context after each step."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import Api

pytestmark = pytest.mark.both_stores


async def played(api: Api, story: dict[str, Any]) -> tuple[str, str, str]:
    user, reply = await api.turn(story["id"], "你一个人守了多久？", "七年。")
    await api.call("POST", f"/v1/nodes/{user}/hide")
    user2, _ = await api.turn(story["id"], "油够吗？", "够。")
    return user, reply, user2


async def test_replay_lists_each_steps_events_from_root_to_leaf(api: Api, story: dict[str, Any]) -> None:
    await played(api, story)
    replay = await api.call("GET", f"/v1/stories/{story['id']}/replay")
    background = {"SideJobSkipped"}  # the scribe's outcome (no side model here), written when its job runs
    assert [[e["type"] for e in step["events"] if e["type"] not in background] for step in replay["steps"]] == [
        ["GreetingPlaced"], ["UserSpoke", "NodeHidden"], ["ReplyPosted"], ["UserSpoke"], ["ReplyPosted"]
    ]  # fmt: skip
    assert replay["steps"][0]["node_id"] == story["root_id"] and replay["next_depth"] is None


async def test_replay_stops_at_the_requested_node(api: Api, story: dict[str, Any]) -> None:
    _, reply, _ = await played(api, story)
    replay = await api.call("GET", f"/v1/stories/{story['id']}/replay?at={reply}")
    assert replay["at"] == reply
    assert [step["kind"] for step in replay["steps"]] == ["greeting", "user", "reply"]


async def test_replay_reports_the_context_size_after_each_step(api: Api, story: dict[str, Any]) -> None:
    await played(api, story)
    steps = (await api.call("GET", f"/v1/stories/{story['id']}/replay"))["steps"]
    tokens = [s["context_tokens"] for s in steps]
    assert [s["visible_nodes"] for s in steps] == [1, 1, 2, 3, 4]
    assert tokens[0] > 0 and tokens[1] == tokens[0] and tokens == sorted(tokens) and tokens[-1] > tokens[2]
    context = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert (steps[-1]["context_tokens"], steps[-1]["context_messages"]) == (context["tokens"], len(context["messages"]))


async def test_replay_pages_by_depth(api: Api, story: dict[str, Any]) -> None:
    await played(api, story)
    first = await api.call("GET", f"/v1/stories/{story['id']}/replay?limit=2")
    rest = await api.call("GET", f"/v1/stories/{story['id']}/replay?from_depth={first['next_depth']}")
    assert [s["depth"] for s in first["steps"] + rest["steps"]] == [0, 1, 2, 3, 4]
