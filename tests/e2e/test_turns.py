"""Engine mode over HTTP: the main model (the fake server) writes the reply through draft tools.

The tool loop, version conflicts, direct output capture, trailing text, ask → answer → resume,
revisions of the previous reply, the round limit, malformed tool arguments and regenerate."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.app import create_app
from api.keys import SERVICE
from providers.fake_server import FakeModelServer, Text, ToolCalls
from tests.builders import OTHER_TENANT, TENANT, Api, MakeClient, api_for
from tests.fake_model import (
    MakeEngine,
    append,
    ask,
    calls,
    draft,
    edit,
    messages_of,
    node,
    post_turn,
    seal,
    write,
)

pytestmark = pytest.mark.both_stores

PROBLEM = "application/problem+json"


async def test_turn_tool_loop_writes_edits_and_seals_over_several_rounds(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(
        calls(write(0, "雾从海面升起。灯塔的灯灭了。")),
        calls(edit(1, ("雾从海面升起", "风从北边吹来"), ("灭了", "还亮着")), ("draft_read", {})),
        calls(append(2, "沈砚提着油灯上楼。")),
        calls(seal(3)),
    )
    turn = await post_turn(engine, engine_story["id"])
    reply_id = turn["reply"]["id"]
    text = "风从北边吹来。灯塔的灯还亮着。\n\n沈砚提着油灯上楼。"

    assert turn["outcome"] == "sealed"
    assert (turn["reply"]["text"], turn["reply"]["phase"], turn["reply"]["draft_version"]) == (text, "sealed", 3)
    assert [(t["name"], t["ok"]) for t in turn["tools"]] == [
        ("draft_write", True),
        ("draft_edit", True),
        ("draft_read", True),
        ("draft_append", True),
        ("draft_seal", True),
    ]
    history = await draft(engine, reply_id)
    assert [(v["version"], v["operation"], v["direct"]) for v in history["versions"]] == [
        (1, "draft_write", False),
        (2, "draft_edit", False),
        (3, "draft_append", False),
    ]
    assert history["versions"][0]["text"] == "雾从海面升起。灯塔的灯灭了。"
    assert history["versions"][1]["text"] == "风从北边吹来。灯塔的灯还亮着。"
    assert history["versions"][-1]["text"] == text
    assert (history["phase"], history["sealed_version"], history["refusals"]) == ("sealed", 3, [])

    path = await engine.call("GET", f"/v1/stories/{engine_story['id']}/path")
    assert path["leaf_id"] == reply_id
    assert [(n["kind"], n["text"]) for n in path["nodes"][-2:]] == [("user", "灯塔怎么了？"), ("reply", text)]
    tree = await engine.call("GET", f"/v1/stories/{engine_story['id']}/tree")
    (row,) = [n for n in tree["nodes"] if n["id"] == reply_id]
    assert (row["phase"], row["chars"], row["preview"]) == ("sealed", len(text), text)


async def test_turn_sends_the_tool_results_back_to_the_model_each_round(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(write(0, "雾。"), ("draft_read", {})), calls(seal(1)))
    await post_turn(engine, engine_story["id"], "你好。")
    first, second = fake.requests
    assert first["tools"] and second["tools"]
    assert messages_of(first, "system")[0]["content"].endswith("不调用工具直接输出的正文会被收入稿纸并自动收笔。")
    assert messages_of(first, "user")[-1]["content"] == "你好。"
    (assistant,) = messages_of(second, "assistant")[-1:]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["draft_write", "draft_read"]
    results = messages_of(second, "tool")
    assert [r["tool_call_id"] for r in results] == ["call_0", "call_1"]
    assert "v1" in results[0]["content"] and results[1]["content"].endswith("雾。")


async def test_turn_reports_version_conflicts_as_tool_results_and_still_completes(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(
        calls(write(0, "第一稿。")),
        calls(write(0, "拿旧版本覆盖。"), edit(0, ("第一稿", "改"))),
        calls(seal(1)),
    )
    turn = await post_turn(engine, engine_story["id"])
    assert turn["outcome"] == "sealed"
    assert [(t["name"], t["ok"]) for t in turn["tools"]] == [
        ("draft_write", True),
        ("draft_write", False),
        ("draft_edit", False),
        ("draft_seal", True),
    ]
    assert "版本冲突" in turn["tools"][1]["result"]  # what the model is told, in the story's language
    assert turn["reply"]["text"] == "第一稿。"
    conflict = messages_of(fake.requests[2], "tool")[-2:]
    assert all("版本冲突" in m["content"] for m in conflict)
    history = await draft(engine, turn["reply"]["id"])
    assert [r["tool"] for r in history["refusals"]] == ["draft_write", "draft_edit"]
    assert all("version conflict" in r["reason"] for r in history["refusals"])  # the events' reasons: English
    assert [v["version"] for v in history["versions"]] == [1]


async def test_turn_captures_direct_text_output_and_seals_it(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text(["门被风撞开。", "沈砚抬起头。"]))
    turn = await post_turn(engine, engine_story["id"])
    assert turn["outcome"] == "sealed"
    assert (turn["reply"]["text"], turn["reply"]["phase"]) == ("门被风撞开。沈砚抬起头。", "sealed")
    assert turn["tools"] == []
    history = await draft(engine, turn["reply"]["id"])
    assert [(v["version"], v["operation"], v["direct"]) for v in history["versions"]] == [(1, "draft_write", True)]
    assert history["sealed_version"] == 1


async def test_turn_appends_trailing_text_to_an_unsealed_draft_and_seals(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(write(0, "第一段。")), Text("第二段。"))
    turn = await post_turn(engine, engine_story["id"])
    assert turn["outcome"] == "sealed"
    assert (turn["reply"]["text"], turn["reply"]["phase"]) == ("第一段。\n\n第二段。", "sealed")
    history = await draft(engine, turn["reply"]["id"])
    assert [(v["operation"], v["direct"]) for v in history["versions"]] == [
        ("draft_write", False),
        ("draft_append", True),
    ]
    assert history["sealed_version"] == 2


async def test_turn_ask_pauses_and_the_answer_resumes_it(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(write(0, "他站在岔路口。")), calls(ask("往哪边走？", "灯塔", "码头", "回家")))
    asked = await post_turn(engine, engine_story["id"])
    reply_id = asked["reply"]["id"]
    assert asked["outcome"] == "asked"
    assert asked["ask"]["question"] == "往哪边走？"
    assert asked["ask"]["options"] == ["灯塔", "码头", "回家"]
    assert asked["reply"]["phase"] == "waiting"
    assert (await node(engine, reply_id))["phase"] == "waiting"
    tree = await engine.call("GET", f"/v1/stories/{engine_story['id']}/tree")
    assert [(n["id"], n["phase"], n["preview"]) for n in tree["nodes"]][-1] == (reply_id, "waiting", "他站在岔路口。")

    fake.script(calls(append(1, "他走向灯塔。")), calls(seal(2)))
    answered = await engine.call("POST", f"/v1/nodes/{reply_id}/answer", {"answer": "灯塔"}, 201)
    assert answered["outcome"] == "sealed"
    assert answered["reply"]["id"] == reply_id
    assert (answered["reply"]["text"], answered["reply"]["phase"]) == ("他站在岔路口。\n\n他走向灯塔。", "sealed")

    resumed = fake.requests[2]
    assistant = [m for m in messages_of(resumed, "assistant") if m.get("tool_calls")]
    (ask_call,) = assistant[-1]["tool_calls"]
    assert ask_call["id"] == asked["ask"]["ask_id"]
    assert ask_call["function"]["name"] == "ask"
    assert "往哪边走？" in ask_call["function"]["arguments"]
    (result,) = [m for m in messages_of(resumed, "tool") if m["tool_call_id"] == ask_call["id"]]
    assert "「灯塔」" in result["content"]
    assert "他站在岔路口。" in result["content"]  # the draft as it stands goes with the answer
    history = await draft(engine, reply_id)
    assert history["asks"] == [
        {"ask_id": ask_call["id"], "question": "往哪边走？", "options": ["灯塔", "码头", "回家"], "answer": "灯塔"}
    ]


async def test_answer_to_a_reply_that_is_not_waiting_is_a_problem(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text("好。"))
    turn = await post_turn(engine, engine_story["id"])
    for target in (turn["reply"]["id"], turn["reply"]["parent_id"]):
        async with engine.client.post(
            f"/v1/nodes/{target}/answer", json={"answer": "灯塔"}, headers=engine.headers
        ) as response:
            problem = await response.json(content_type=None)
            assert 400 <= response.status < 500
            assert response.content_type == PROBLEM
            assert problem["status"] == response.status
    assert len(fake.requests) == 1
    assert (await node(engine, turn["reply"]["id"]))["phase"] == "sealed"


async def test_stop_closes_a_turn_left_waiting_for_an_answer(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(ask("往哪边走？", "灯塔", "码头")))
    asked = await post_turn(engine, engine_story["id"])
    stopped = await engine.call("POST", f"/v1/nodes/{asked['reply']['id']}/stop")
    assert stopped["was_running"] is False
    assert stopped["reply"]["phase"] == "stopped"
    await engine.call("POST", f"/v1/nodes/{asked['reply']['id']}/answer", {"answer": "灯塔"}, 422)


async def test_turn_revises_the_previous_reply_in_place(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text("风很大。灯塔的门被吹开了。"))
    first = await post_turn(engine, engine_story["id"])
    previous_id = first["reply"]["id"]
    fake.script(
        calls(("previous_draft_read", {})),
        calls(("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]})),
    )
    turn = await post_turn(engine, engine_story["id"], "把上一段的风改成停了。")

    assert turn["outcome"] == "revised"
    assert turn["reply"]["phase"] == "withdrawn"
    assert [(t["name"], t["ok"]) for t in turn["tools"]] == [
        ("previous_draft_read", True),
        ("previous_draft_edit", True),
    ]
    assert turn["tools"][0]["result"].endswith("风很大。灯塔的门被吹开了。")
    previous = await node(engine, previous_id)
    assert (previous["text"], previous["revisions"], previous["phase"]) == ("风停了。灯塔的门被吹开了。", 1, "sealed")
    story = await engine.call("GET", f"/v1/stories/{engine_story['id']}")
    assert story["leaf_id"] == previous_id
    history = await draft(engine, previous_id)
    assert [r["text"] for r in history["revisions"]] == ["风停了。灯塔的门被吹开了。"]
    tree = await engine.call("GET", f"/v1/stories/{engine_story['id']}/tree")
    phases = {n["id"]: (n["phase"], n["revisions"]) for n in tree["nodes"]}
    assert phases[previous_id] == ("sealed", 1)
    assert phases[turn["reply"]["id"]] == ("withdrawn", 0)


async def test_previous_draft_edit_without_reading_first_is_refused(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text("风很大。"))
    first = await post_turn(engine, engine_story["id"])
    fake.script(
        calls(("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]})),
        Text("那就写新的一段。"),
    )
    turn = await post_turn(engine, engine_story["id"])
    assert turn["outcome"] == "sealed"
    assert [(t["name"], t["ok"]) for t in turn["tools"]] == [("previous_draft_edit", False)]
    assert "previous_draft_read" in turn["tools"][0]["result"]
    assert turn["reply"]["text"] == "那就写新的一段。"
    previous = await node(engine, first["reply"]["id"])
    assert (previous["text"], previous["revisions"]) == ("风很大。", 0)


async def test_turn_is_cut_at_the_round_limit(fake: FakeModelServer, make_engine: MakeEngine) -> None:
    engine = await make_engine(max_rounds=3)
    story = await engine.story()
    fake.fallback = lambda body: ToolCalls(("draft_read", {}))
    turn = await post_turn(engine, story["id"])
    assert turn["outcome"] == "stopped"
    assert turn["reply"]["phase"] == "stopped"
    assert len(fake.requests) == 3 + 1
    assert all(r.get("tools") for r in fake.requests[:3])
    assert "tools" not in fake.requests[-1]
    history = await draft(engine, turn["reply"]["id"])
    assert history["stopped"]["reason"] == "runaway"
    assert [t["name"] for t in turn["tools"]] == ["draft_read"] * 3


async def test_turn_answers_malformed_tool_arguments_with_a_tool_error(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(
        ToolCalls(("draft_write", '{"version": 0, "content": ')),
        calls(write(0, "这次写对了。"), seal(1)),
    )
    turn = await post_turn(engine, engine_story["id"])
    assert turn["outcome"] == "sealed"
    assert [(t["name"], t["ok"]) for t in turn["tools"]] == [
        ("draft_write", False),
        ("draft_write", True),
        ("draft_seal", True),
    ]
    (error,) = messages_of(fake.requests[1], "tool")
    assert "JSON" in error["content"]
    (assistant,) = [m for m in messages_of(fake.requests[1], "assistant") if m.get("tool_calls")]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"version": 0, "content": '
    assert turn["reply"]["text"] == "这次写对了。"


async def test_turn_with_an_unknown_tool_is_told_so_and_goes_on(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(("draft_delete", {"version": 0})), Text("好。"))
    turn = await post_turn(engine, engine_story["id"])
    assert turn["outcome"] == "sealed"
    assert [(t["name"], t["ok"]) for t in turn["tools"]] == [("draft_delete", False)]


async def test_turn_with_neither_text_nor_tools_stops_without_a_draft(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text(""))
    turn = await post_turn(engine, engine_story["id"])
    assert turn["outcome"] == "stopped"
    assert (turn["reply"]["phase"], turn["reply"]["text"]) == ("stopped", "")


async def test_regenerate_in_engine_mode_adds_a_sibling_reply(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text("答一。"), Text("答二。"))
    first = await post_turn(engine, engine_story["id"])
    again = await engine.call("POST", f"/v1/stories/{engine_story['id']}/regenerate", {}, 201)
    assert again["outcome"] == "sealed"
    assert again["reply"]["id"] != first["reply"]["id"]
    assert again["reply"]["parent_id"] == first["reply"]["parent_id"]
    assert again["reply"]["text"] == "答二。"
    siblings = await engine.call("GET", f"/v1/nodes/{first['reply']['id']}/siblings")
    assert [(n["id"], n["text"]) for n in siblings["nodes"]] == [
        (first["reply"]["id"], "答一。"),
        (again["reply"]["id"], "答二。"),
    ]
    story = await engine.call("GET", f"/v1/stories/{engine_story['id']}")
    assert story["leaf_id"] == again["reply"]["id"]
    # the regenerated reply answers the same user words, without the first reply in its context
    assert messages_of(fake.requests[1], "user")[-1]["content"] == "灯塔怎么了？"
    assert "答一。" not in str(fake.requests[1]["messages"])


async def test_regenerate_answers_an_explicit_user_node_again(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text("答一。"), Text("答二。"), Text("另一答。"))
    first = await post_turn(engine, engine_story["id"], "第一问。")
    await post_turn(engine, engine_story["id"], "第二问。")
    user_id = first["reply"]["parent_id"]
    again = await engine.call("POST", f"/v1/stories/{engine_story['id']}/regenerate", {"user_id": user_id}, 201)
    assert again["reply"]["parent_id"] == user_id
    assert messages_of(fake.requests[2], "user")[-1]["content"] == "第一问。"


async def test_turn_without_a_main_model_is_503(make_client: MakeClient) -> None:
    client: TestClient[Any, Any] = await make_client()
    api = api_for(client, TENANT)
    story = await api.story()
    for path, body in (
        (f"/v1/stories/{story['id']}/turns", {"text": "你好。"}),
        (f"/v1/stories/{story['id']}/regenerate", {}),
    ):
        async with api.client.post(path, json=body, headers=api.headers) as response:
            problem = await response.json(content_type=None)
            assert response.status == 503
            assert response.content_type == PROBLEM
            assert "CHANGJI_MAIN_BASE_URL" in problem["detail"]
    tree = await api.call("GET", f"/v1/stories/{story['id']}/tree")
    assert len(tree["nodes"]) == 1  # nothing was opened


async def test_turn_under_a_parent_that_is_not_a_reply_or_greeting_is_refused(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text("好。"))
    turn = await post_turn(engine, engine_story["id"])
    body = {"text": "再问。", "parent_id": turn["reply"]["parent_id"]}
    await engine.call("POST", f"/v1/stories/{engine_story['id']}/turns", body, 422)
    assert len(fake.requests) == 1


async def test_context_after_a_revision_shows_the_revised_reply(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(
        Text("风很大。"),
        calls(("previous_draft_read", {})),
        calls(("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]})),
        Text("船来了。"),
    )
    await post_turn(engine, engine_story["id"], "天气如何？")
    await post_turn(engine, engine_story["id"], "改成风停了。")
    context = await engine.call("GET", f"/v1/stories/{engine_story['id']}/context")
    assert [(m["role"], m["content"]) for m in context["messages"][-2:]] == [
        ("user", "天气如何？"),
        ("assistant", "风停了。"),
    ]
    await post_turn(engine, engine_story["id"], "然后呢？")
    sent = [(m["role"], m["content"]) for m in fake.requests[-1]["messages"][-3:]]
    assert sent == [("user", "天气如何？"), ("assistant", "风停了。"), ("user", "然后呢？")]


async def test_turn_with_a_stale_if_match_is_409_and_calls_no_model(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(Text("好。"), Text("又好。"))
    await post_turn(engine, engine_story["id"])
    headers = {"If-Match": f'"{engine_story["version"]}"'}
    await engine.call("POST", f"/v1/stories/{engine_story['id']}/turns", {"text": "再来。"}, 409, headers)
    assert len(fake.requests) == 1
    current = await engine.call("GET", f"/v1/stories/{engine_story['id']}")
    headers = {"If-Match": f'"{current["version"]}"'}
    turn = await engine.call("POST", f"/v1/stories/{engine_story['id']}/turns", {"text": "再来。"}, 201, headers)
    assert turn["outcome"] == "sealed"


async def test_two_answers_to_one_ask_resume_the_turn_once(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(ask("往哪边走？", "灯塔", "码头")), Text("去灯塔。"), Text("不该被请求。"))
    asked = await post_turn(engine, engine_story["id"])
    path = f"/v1/nodes/{asked['reply']['id']}/answer"

    async def answer(choice: str) -> int:
        async with engine.client.post(path, json={"answer": choice}, headers=engine.headers) as response:
            await response.read()
            return response.status

    statuses = await asyncio.gather(answer("灯塔"), answer("码头"))
    assert sorted(statuses) == [201, 422]
    assert len(fake.requests) == 2
    assert (await node(engine, asked["reply"]["id"]))["phase"] == "sealed"


async def test_turn_endpoints_of_another_tenant_are_not_found(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(ask("往哪边走？", "灯塔", "码头")))
    asked = await post_turn(engine, engine_story["id"])
    reply_id = asked["reply"]["id"]
    other = api_for(engine.client, OTHER_TENANT)
    await other.call("POST", f"/v1/stories/{engine_story['id']}/turns", {"text": "你好。"}, 404)
    await other.call("POST", f"/v1/stories/{engine_story['id']}/regenerate", {}, 404)
    await other.call("POST", f"/v1/nodes/{reply_id}/answer", {"answer": "灯塔"}, 404)
    await other.call("POST", f"/v1/nodes/{reply_id}/stop", status=404)
    await other.call("GET", f"/v1/nodes/{reply_id}/draft", status=404)
    assert len(fake.requests) == 1
    assert (await node(engine, reply_id))["phase"] == "waiting"


async def test_stop_of_a_reply_not_written_by_the_engine_is_refused(engine: Api, engine_story: dict[str, Any]) -> None:
    user, reply = await engine.turn(engine_story["id"], "你好。", "自带模型写的回复。")
    for target in (user, reply):
        await engine.call("POST", f"/v1/nodes/{target}/stop", status=422)
    history = await draft(engine, reply)
    assert [(v["version"], v["operation"], v["text"]) for v in history["versions"]] == [
        (0, "ReplyPosted", "自带模型写的回复。")
    ]


async def test_answer_after_a_restart_resumes_the_turn(
    fake: FakeModelServer, engine: Api, engine_story: dict[str, Any]
) -> None:
    fake.script(calls(write(0, "他站在岔路口。")), calls(ask("往哪边走？", "灯塔", "码头")))
    asked = await post_turn(engine, engine_story["id"])
    settings = engine.client.app[SERVICE].settings
    await engine.client.close()

    restarted: TestClient[Any, Any] = TestClient(TestServer(create_app(settings)))
    await restarted.start_server()
    try:
        api = api_for(restarted, TENANT)
        fake.script(calls(append(1, "他走向灯塔。"), seal(2)))
        answered = await api.call("POST", f"/v1/nodes/{asked['reply']['id']}/answer", {"answer": "灯塔"}, 201)
    finally:
        await restarted.close()
    assert answered["outcome"] == "sealed"
    assert answered["reply"]["text"] == "他站在岔路口。\n\n他走向灯塔。"
    (result,) = [m for m in messages_of(fake.requests[-1], "tool") if m["tool_call_id"] == asked["ask"]["ask_id"]]
    assert "「灯塔」" in result["content"]
