"""Engine turns as server-sent events: the stream's shape, stop while streaming, and a client that
goes away mid-turn (the turn stops; what was streamed stays as an unsealed draft)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from api.keys import SERVICE
from providers.fake_server import FakeModelServer, Text
from tests.builders import Api
from tests.fake_model import (
    SSE,
    EventStream,
    MakeEngine,
    append,
    ask,
    calls,
    draft,
    edit,
    node,
    seal,
    wait_until,
    write,
)

pytestmark = pytest.mark.both_stores

SLOW = [f"第{i}句。" for i in range(1, 21)]  # 20 chunks, 0.1 s apart: about 2 s if nobody stops it


async def test_turn_stream_sends_turn_deltas_tools_sealed_done_in_order(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(write(0, "雾散了。"), text="我先写一段。"), calls(seal(1)))
    async with engine.client.post(
        f"/v1/stories/{engine_story['id']}/turns", json={"text": "你好。"}, headers={**engine.headers, **SSE}
    ) as response:
        assert response.status == 200
        assert response.content_type == "text/event-stream"
        stream = EventStream(response)
        events = await stream.all()

    kinds = [k for k, _ in events]
    written = [d for k, d in events if k == "delta" and d.get("tool")]  # the draft_write's words as they came
    assert kinds == ["turn", "delta", *["delta"] * len(written), "tool", "tool", "sealed", "done"]
    assert "".join(d["text"] for d in written) == "雾散了。"
    assert (written[0]["tool"], written[0]["call"], written[0]["first"]) == ("draft_write", 0, True)
    turn, delta = events[0][1], events[1][1]
    wrote, sealed_tool, sealed, done = (d for _, d in events[-4:])
    assert turn["model"] == "fake-main"
    assert delta == {"text": "我先写一段。"}
    assert (wrote["name"], wrote["ok"], sealed_tool["name"]) == ("draft_write", True, "draft_seal")
    assert (sealed["reply_id"], sealed["version"], sealed["text"]) == (turn["reply_id"], 1, "雾散了。")
    assert done == {}
    # the framing: every event line is followed by exactly one data line and a blank line
    body = [line for line in stream.lines if not line.startswith(":")]  # keep-alive comments aside
    assert len(body) == 3 * len(events)
    for i, (kind, data) in enumerate(events):
        event, payload, blank = body[3 * i : 3 * i + 3]
        assert event == f"event: {kind}\n"
        assert payload.startswith("data: ") and payload.endswith("\n")
        assert json.loads(payload[len("data: ") :]) == data
        assert blank == "\n"
    assert (await node(engine, turn["reply_id"]))["phase"] == "sealed"


def shown_draft(events: list[tuple[str, dict[str, Any]]]) -> str:
    """The draft as a player following the stream shows it: a first delta of a `draft_write` (or a
    `draft`, the draft as recorded) starts it over, every other tool delta adds to it."""
    shown = ""
    for kind, data in events:
        if kind == "delta" and data.get("tool"):
            shown = data["text"] if data["first"] and data["tool"] in ("draft_write", "draft") else shown + data["text"]
    return shown


async def streamed(engine: Api, story: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    async with engine.client.post(
        f"/v1/stories/{story['id']}/turns", json={"text": "你好。"}, headers={**engine.headers, **SSE}
    ) as response:
        return await EventStream(response).all()


async def test_the_streamed_draft_joins_its_appends_as_the_sealed_text_does(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    """Each append onto a draft with text opens with its separator: the tool's default, or the call's own
    when the model gave it before the content; an append onto an empty draft opens with nothing."""
    fake.script(
        calls(append(0, "门开了。")),  # (onto the empty draft: nothing before it)
        calls(append(1, "雾散了。"), ("draft_append", {"version": 2, "separator": "——", "content": "灯亮了。"})),
        calls(seal(3)),
    )
    events = await streamed(engine, engine_story)
    sealed = next(d for k, d in events if k == "sealed")
    assert sealed["text"] == "门开了。\n\n雾散了。——灯亮了。" == shown_draft(events)
    assert not any(d.get("tool") == "draft" for _, d in events)  # (nothing to set right)


async def test_words_streamed_but_not_recorded_are_set_right_after_their_round(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    """A refused write's streamed words, an empty write, an edit: after the round, one `draft` delta
    holds the draft as recorded, and the shown draft is the sealed one."""
    fake.script(
        calls(write(7, "甲。")),  # refused (a stale version): its words went out all the same
        calls(write(0, "乙。"), write(1, "")),  # the second empties the draft
        calls(append(2, "丙。"), edit(3, ("丙", "丁"))),
        calls(seal(4)),
    )
    events = await streamed(engine, engine_story)
    fixes = [d["text"] for k, d in events if k == "delta" and d.get("tool") == "draft"]
    assert fixes == ["", "丁。"]  # (after the refused write, and after the edit; the empty write showed itself)
    sealed = next(d for k, d in events if k == "sealed")
    assert sealed["text"] == "丁。" == shown_draft(events)
    refused = [d for k, d in events if k == "tool" and not d["ok"]]
    assert [d["name"] for d in refused] == ["draft_write"]


async def test_turn_stream_delivers_each_text_chunk_as_a_delta(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text(["门被", "风撞", "开。"]))
    async with engine.client.post(
        f"/v1/stories/{engine_story['id']}/turns", json={"text": "你好。"}, headers={**engine.headers, **SSE}
    ) as response:
        events = await EventStream(response).all()
    assert [d["text"] for k, d in events if k == "delta"] == ["门被", "风撞", "开。"]
    assert [k for k, _ in events] == ["turn", "delta", "delta", "delta", "sealed", "done"]


async def test_turn_stream_ends_with_ask_and_the_answer_streams_too(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(ask("往哪边走？", "灯塔", "码头")))
    async with engine.client.post(
        f"/v1/stories/{engine_story['id']}/turns", json={"text": "你好。"}, headers={**engine.headers, **SSE}
    ) as response:
        events = await EventStream(response).all()
    assert [k for k, _ in events] == ["turn", "tool", "ask", "done"]
    asked = events[2][1]
    assert (asked["question"], asked["options"]) == ("往哪边走？", ["灯塔", "码头"])

    fake.script(Text("去灯塔。"))
    async with engine.client.post(
        f"/v1/nodes/{asked['reply_id']}/answer", json={"answer": "灯塔"}, headers={**engine.headers, **SSE}
    ) as response:
        resumed = await EventStream(response).all()
    assert [k for k, _ in resumed] == ["turn", "delta", "sealed", "done"]
    assert resumed[2][1]["text"] == "去灯塔。"


async def test_turn_stream_reports_an_error_event_then_done(fake: FakeModelServer, make_engine: MakeEngine) -> None:
    engine = await make_engine(max_retries=0, read_timeout=0.3)
    story = await engine.story()
    fake.script(Text(["开头。", "后来。"], chunk_delay=0.6))
    async with engine.client.post(
        f"/v1/stories/{story['id']}/turns", json={"text": "你好。"}, headers={**engine.headers, **SSE}
    ) as response:
        events = await EventStream(response).all()
    assert [k for k, _ in events] == ["turn", "delta", "error", "done"]
    assert events[2][1]["outcome"] == "interrupted"
    assert events[2][1]["draft_version"] == 1


async def test_stop_while_streaming_keeps_the_partial_text(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text(SLOW, chunk_delay=0.1))
    async with engine.client.post(
        f"/v1/stories/{engine_story['id']}/turns", json={"text": "你好。"}, headers={**engine.headers, **SSE}
    ) as response:
        stream = EventStream(response)
        seen = await stream.until("delta")
        reply_id = seen[0][1]["reply_id"]
        stopped = await engine.call("POST", f"/v1/nodes/{reply_id}/stop")
        rest = await stream.all()

    assert stopped["was_running"] is True
    reply = stopped["reply"]
    assert reply["phase"] == "stopped"
    assert reply["text"].startswith("第1句。")
    assert "".join(SLOW).startswith(reply["text"]) and reply["text"] != "".join(SLOW)
    assert [k for k, _ in rest][-2:] == ["stopped", "done"]
    assert rest[-2][1]["reason"] == "stopped"
    streamed = "".join(d["text"] for k, d in seen + rest if k == "delta")
    assert streamed == reply["text"]  # every delta the client saw is in the kept draft, and nothing else
    history = await draft(engine, reply_id)
    assert (history["stopped"]["reason"], history["sealed_version"]) == ("stopped", None)
    again = await engine.call("POST", f"/v1/nodes/{reply_id}/stop")
    assert again["was_running"] is False
    assert again["reply"]["text"] == reply["text"]


async def test_stop_of_a_json_turn_answers_the_waiting_request_with_stopped(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text(SLOW, chunk_delay=0.1))
    pending = asyncio.create_task(
        engine.call("POST", f"/v1/stories/{engine_story['id']}/turns", {"text": "你好。"}, 201)
    )

    running = engine.client.app[SERVICE].turns.running

    async def streaming() -> bool:
        return len(fake.requests) == 1 and len(running) == 1

    await wait_until(streaming)
    (reply_id,) = running
    stopped = await engine.call("POST", f"/v1/nodes/{reply_id}/stop")
    turn = await pending
    assert stopped["was_running"] is True
    assert turn["outcome"] == "stopped"
    assert turn["reply"]["phase"] == "stopped"


async def test_client_disconnect_during_the_stream_stops_the_turn(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text(SLOW, chunk_delay=0.1))
    async with engine.client.post(
        f"/v1/stories/{engine_story['id']}/turns", json={"text": "你好。"}, headers={**engine.headers, **SSE}
    ) as response:
        seen = await EventStream(response).until("delta")
        reply_id = seen[0][1]["reply_id"]
        response.close()

    async def stopped() -> bool:
        return (await node(engine, reply_id))["phase"] == "stopped"

    await wait_until(stopped, attempts=100, pause=0.05)
    reply = await node(engine, reply_id)
    assert reply["text"].startswith("第1句。")
    assert "".join(SLOW).startswith(reply["text"]) and reply["text"] != "".join(SLOW)
    history = await draft(engine, reply_id)
    assert history["stopped"]["reason"] == "disconnected"
    assert [v["direct"] for v in history["versions"]] == [True]
