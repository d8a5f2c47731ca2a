"""Engine turns when the model misbehaves: retried errors, timeouts and broken streams mid-reply, with
what was streamed kept as an unsealed draft and a clean error outcome."""

from __future__ import annotations

from typing import Any

import pytest

from providers.fake_server import Drop, FakeModelServer, Malformed, Status, Step, Text
from tests.builders import Api
from tests.fake_model import MakeEngine, calls, costs, draft, node, post_turn, write


async def test_turn_retries_429_and_500_then_seals(fake: FakeModelServer, engine: Api) -> None:
    story = await engine.story()
    fake.script(Status(status=429, retry_after=0), Status(status=500, retry_after=0), Text("终于好了。"))
    turn = await post_turn(engine, story["id"])
    assert turn["outcome"] == "sealed"
    assert (turn["reply"]["text"], turn["reply"]["phase"]) == ("终于好了。", "sealed")
    assert len(fake.requests) == 3
    ledger = await costs(engine, f"/v1/stories/{story['id']}")
    assert (ledger["calls"], ledger["prompt_tokens"]) == (1, 100)
    (line,) = ledger["lines"]
    assert (line["purpose"], line["model"], line["calls"], line["ok"]) == ("turn", "fake-main", 1, 1)


async def test_turn_error_after_retries_is_a_clean_error_outcome(
    fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    engine = await make_engine(max_retries=1)
    story = await engine.story()
    fake.script(Status(status=503, retry_after=0), Status(status=503, retry_after=0))
    turn = await post_turn(engine, story["id"])
    assert turn["outcome"] == "error"
    assert turn["error"]["outcome"] == "http 503"
    assert (turn["reply"]["phase"], turn["reply"]["text"]) == ("stopped", "")
    assert len(fake.requests) == 2


async def test_turn_bad_request_from_the_model_is_not_retried(fake: FakeModelServer, engine: Api) -> None:
    story = await engine.story()
    fake.script(Status(status=400), Text("不该被请求。"))
    turn = await post_turn(engine, story["id"])
    assert (turn["outcome"], turn["error"]["outcome"]) == ("error", "http 400")
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "broken",
    [Text(["开头。", "后来。"], chunk_delay=0.6), Drop(["开头。"])],
    ids=["slow-after-first-chunk", "dropped-after-text"],
)
async def test_turn_broken_mid_stream_keeps_the_streamed_text_as_an_unsealed_draft(
    fake: FakeModelServer, make_engine: MakeEngine, broken: Step
) -> None:
    engine = await make_engine(read_timeout=0.3)
    story = await engine.story()
    fake.script(broken, Text("不该被请求。"))
    turn = await post_turn(engine, story["id"])
    reply_id = turn["reply"]["id"]

    assert turn["outcome"] == "error"
    assert turn["error"]["outcome"] == "interrupted"
    assert turn["error"]["draft_version"] == 1
    assert (turn["reply"]["phase"], turn["reply"]["text"]) == ("stopped", "开头。")
    assert len(fake.requests) == 1
    history = await draft(engine, reply_id)
    assert history["sealed_version"] is None
    assert history["stopped"]["reason"] == "error"
    assert history["stopped"]["detail"].startswith("interrupted")
    assert [(v["text"], v["direct"]) for v in history["versions"]] == [("开头。", True)]
    assert (await node(engine, reply_id))["phase"] == "stopped"
    tree = await engine.call("GET", f"/v1/stories/{story['id']}/tree")
    assert [(n["id"], n["phase"], n["chars"]) for n in tree["nodes"]][-1] == (reply_id, "stopped", len("开头。"))
    ledger = await costs(engine, f"/v1/stories/{story['id']}")
    assert (ledger["calls"], ledger["lines"][0]["ok"]) == (1, 0)


async def test_turn_broken_in_a_later_round_keeps_the_earlier_draft(
    fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    engine = await make_engine(read_timeout=0.3)
    story = await engine.story()
    fake.script(calls(write(0, "第一段。")), Drop(["尾巴"]))
    turn = await post_turn(engine, story["id"])
    assert (turn["outcome"], turn["error"]["outcome"]) == ("error", "interrupted")
    assert (turn["reply"]["phase"], turn["reply"]["text"]) == ("stopped", "第一段。\n\n尾巴")
    history = await draft(engine, turn["reply"]["id"])
    assert [(v["operation"], v["direct"]) for v in history["versions"]] == [
        ("draft_write", False),
        ("draft_append", True),
    ]


async def test_turn_timeout_before_any_text_leaves_no_draft(fake: FakeModelServer, make_engine: MakeEngine) -> None:
    engine = await make_engine(read_timeout=0.3, max_retries=1)
    story = await engine.story()
    fake.script(Text("慢。", delay=0.6), Text("还是慢。", delay=0.6))
    turn = await post_turn(engine, story["id"])
    assert (turn["outcome"], turn["error"]["outcome"]) == ("error", "timeout")
    assert (turn["reply"]["phase"], turn["reply"]["text"], turn["reply"]["draft_version"]) == ("stopped", "", 0)
    assert len(fake.requests) == 2
    ledger = await costs(engine, f"/v1/stories/{story['id']}")
    assert ledger["calls"] == 1
    assert ledger["lines"][0]["latency_ms"] >= 500  # both slow attempts (2 × 0.3 s) are in the latency


async def test_turn_with_a_malformed_stream_is_a_clean_error(fake: FakeModelServer, engine: Api) -> None:
    story = await engine.story()
    fake.script(Malformed())
    turn = await post_turn(engine, story["id"])
    assert (turn["outcome"], turn["error"]["outcome"]) == ("error", "malformed")
    assert (turn["reply"]["phase"], turn["reply"]["text"]) == ("stopped", "半句")


async def test_turn_dropped_before_any_text_is_retried(fake: FakeModelServer, engine: Api) -> None:
    story = await engine.story()
    fake.script(Drop(), Text("重来一次。"))
    turn = await post_turn(engine, story["id"])
    assert (turn["outcome"], turn["reply"]["text"]) == ("sealed", "重来一次。")
    assert len(fake.requests) == 2


async def test_story_goes_on_after_a_failed_turn(fake: FakeModelServer, make_engine: MakeEngine) -> None:
    engine = await make_engine(max_retries=0)
    story = await engine.story()
    fake.script(Status(status=500), Text("这次好了。"))
    failed = await post_turn(engine, story["id"])
    assert failed["outcome"] == "error"
    again: dict[str, Any] = await engine.call("POST", f"/v1/stories/{story['id']}/regenerate", {}, 201)
    assert again["outcome"] == "sealed"
    assert again["reply"]["parent_id"] == failed["reply"]["parent_id"]
