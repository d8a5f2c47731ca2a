"""Scene state end to end: the scribe job after each reply, its patch on that reply, path order, the
injection into the next context, user edits, and the job listing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from providers.fake_server import FakeModelServer, Status, Text
from tests.builders import OTHER_TENANT, TENANT, Api, MakeClient, api_for
from tests.scene_support import FAST_JOBS, answer, by_marker, jobs, ledger_of, scene, settled, side_model, turn_of

pytestmark = pytest.mark.both_stores

LIGHTHOUSE = {
    "time": "第一夜",
    "location": "灯塔",
    "characters": {"沈砚": {"affinity": 5, "status": "警惕", "at": "灯塔"}},
    "inventory": ["黄铜怀表（User持有）"],
}


@pytest.fixture
async def side() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


@pytest.fixture
async def scribed(side: FakeModelServer, make_client: MakeClient) -> Api:
    return api_for(await make_client(side_model=side_model(side), **FAST_JOBS), TENANT)


async def test_the_scribes_patch_lands_on_its_reply_and_feeds_the_next_context(
    scribed: Api, side: FakeModelServer
) -> None:
    side.fallback = by_marker({"七年": LIGHTHOUSE})
    story = await scribed.story()
    user, reply = await scribed.turn(story["id"], "你一个人守了多久？", "七年。")
    rows = await settled(scribed, story["id"], [reply])
    assert rows[reply]["status"] == "done" and rows[reply]["kind"] == "scribe"
    at_reply = await scene(scribed, story["id"], reply)
    assert at_reply["source_node_id"] == reply
    assert at_reply["state"]["location"] == "灯塔" and at_reply["present"] == ["沈砚"]
    assert at_reply["roster"]["places"] == {"灯塔": "第一夜"} and "黄铜怀表（User持有）" in at_reply["roster"]["items"]
    assert [p["author"] for p in at_reply["patches"]] == ["scribe"]
    before = await scene(scribed, story["id"], user)  # the scene before this turn: nothing yet
    assert before["source_node_id"] is None and before["text"]["state"] == "（尚无记录）"

    request = side.requests[0]
    assert request["model"] == "fake-side" and "tools" not in request
    assert "你一个人守了多久？" in turn_of(request) and "七年。" in turn_of(request)
    assert "沈砚" in request["messages"][0]["content"] and "User" in request["messages"][0]["content"]
    assert ledger_of(request)["characters"] == {}

    await scribed.append(story["id"], "user", "油够吗？")
    context = await scribed.call("GET", f"/v1/stories/{story['id']}/context")
    last = context["messages"][-1]["content"]
    assert last.startswith("【世界状态】\n时间：第一夜\n地点：灯塔\n沈砚：好感 5；状态：警惕；在场")
    assert "【登场名录】人物：沈砚（第一夜）" in last and last.endswith("\n\n油够吗？")
    blocks = {b["what"]: b for b in context["explain"]}
    assert blocks["scene"]["node_ids"] == [reply] and blocks["scene"]["message_index"] == len(context["messages"]) - 1
    assert blocks["roster"]["tokens"] > 0
    assert context["tokens"] == sum(b["tokens"] for b in context["explain"])


async def test_path_order_the_second_scribe_sees_the_first_patch(scribed: Api, side: FakeModelServer) -> None:
    first = Text(answer(LIGHTHOUSE).text, delay=0.3)  # slow: the second reply is posted meanwhile
    side.script(first, answer({"characters": {"沈砚": {"affinity": 8}}, "time": "第一夜·深"}))
    story = await scribed.story()
    _, one = await scribed.turn(story["id"], "你一个人守了多久？", "七年。")
    _, two = await scribed.turn(story["id"], "油够吗？", "够烧到渡船来。")
    rows = await settled(scribed, story["id"], [one, two])
    assert rows[one]["status"] == rows[two]["status"] == "done"
    assert len(side.requests) == 2
    assert "七年" in turn_of(side.requests[0]) and "够烧到渡船来" in turn_of(side.requests[1])
    assert ledger_of(side.requests[1])["location"] == "灯塔"  # computed from the first patch's result
    final = await scene(scribed, story["id"])
    assert final["state"]["characters"]["沈砚"] == {"affinity": 8, "status": "警惕", "notes": "", "at": "灯塔"}
    assert final["state"]["time"] == "第一夜·深" and final["roster"]["characters"] == {"沈砚": "第一夜"}


async def test_a_late_patch_after_a_regenerate_lands_on_its_own_reply_only(scribed: Api, side: FakeModelServer) -> None:
    slow = {"location": "码头", "characters": {"渡船老周": {"at": "码头"}}}
    side.fallback = by_marker({"甲稿": slow, "乙稿": {"location": "灯塔顶"}})
    side.script(Text(answer(slow).text, delay=0.5))  # the first reply's scribe is still thinking …
    story = await scribed.story()
    user, first = await scribed.turn(story["id"], "外面是谁？", "甲稿：是渡船老周。")
    await scribed.call("GET", f"/v1/stories/{story['id']}/scene")  # … while the user regenerates
    second = (await scribed.append(story["id"], "reply", "乙稿：只是风。", user))["node"]["id"]
    rows = await settled(scribed, story["id"], [first, second])
    assert rows[first]["status"] == rows[second]["status"] == "done"

    assert (await scene(scribed, story["id"], first))["state"]["location"] == "码头"
    kept = await scene(scribed, story["id"])  # the leaf is the regenerated reply
    assert kept["at"] == second and kept["state"]["location"] == "灯塔顶"
    assert "渡船老周" not in kept["state"]["characters"] and "渡船老周" not in kept["roster"]["characters"]
    assert [p["patch"] for p in kept["patches"]] == [{"location": "灯塔顶"}]
    nxt = await scribed.append(story["id"], "user", "上去看看。")
    context = await scribed.call("GET", f"/v1/stories/{story['id']}/context")
    assert "灯塔顶" in context["messages"][-1]["content"] and "码头" not in context["messages"][-1]["content"]
    assert (await scene(scribed, story["id"], nxt["node"]["id"]))["source_node_id"] == second


async def test_a_failed_scribe_is_retried_and_its_attempts_are_visible(scribed: Api, side: FakeModelServer) -> None:
    side.script(Status(500), Text("我不太确定该怎么记。"), answer(LIGHTHOUSE))
    story = await scribed.story()
    _, reply = await scribed.turn(story["id"], "你一个人守了多久？", "七年。")
    row = (await settled(scribed, story["id"], [reply]))[reply]
    assert row["status"] == "done" and row["attempts"] == 2 and row["next_at"] is None
    assert len(side.requests) == 3
    costs = await scribed.call("GET", f"/v1/stories/{story['id']}/costs")
    scribe = [line for line in costs["lines"] if line["purpose"] == "scribe"]
    assert sum(line["calls"] for line in scribe) == 3 and sum(line["ok"] for line in scribe) == 2
    draft = await scribed.call("GET", f"/v1/stories/{story['id']}/replay")
    types = [e["type"] for step in draft["steps"] for e in step["events"]]
    assert types.count("SideJobFailed") == 2 and types.count("ScenePatched") == 1


async def test_a_scribe_that_keeps_failing_gives_up_and_the_next_reply_goes_on(
    side: FakeModelServer, make_client: MakeClient
) -> None:
    api = api_for(await make_client(side_model=side_model(side), job_max_attempts=2, **FAST_JOBS), TENANT)
    side.script(Text("不是 JSON"), Text("还是不是"))
    side.fallback = by_marker({"够": {"location": "灯塔"}})
    story = await api.story()
    _, one = await api.turn(story["id"], "你好。", "嗯。")
    _, two = await api.turn(story["id"], "油够吗？", "够。")
    rows = await settled(api, story["id"], [one, two])
    assert rows[one]["status"] == "failed" and rows[one]["attempts"] == 2
    assert "no JSON object" in rows[one]["detail"] and rows[one]["next_at"] is None
    assert rows[two]["status"] == "done"
    assert (await jobs(api, story["id"], status="failed"))[0]["node_id"] == one


async def test_an_empty_patch_is_skipped_with_its_reason(scribed: Api, side: FakeModelServer) -> None:
    side.fallback = lambda body: answer({}, prose=False)
    story = await scribed.story()
    _, reply = await scribed.turn(story["id"], "嗯。", "嗯。")
    row = (await settled(scribed, story["id"], [reply]))[reply]
    assert (row["status"], row["detail"]) == ("skipped", "nothing changed in this turn")
    assert (await scene(scribed, story["id"]))["source_node_id"] is None


async def test_without_a_side_model_scribe_jobs_are_skipped_and_the_story_has_no_scene(api: Api) -> None:
    story = await api.story()
    _, reply = await api.turn(story["id"], "你好。", "嗯。")
    row = (await settled(api, story["id"], [reply], timeout=10))[reply]
    assert (row["status"], row["detail"], row["attempts"]) == ("skipped", "no side model", 0)
    await api.append(story["id"], "user", "再见。")
    context = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert "【世界状态】" not in context["messages"][-1]["content"]
    assert not {"scene", "roster"} & {b["what"] for b in context["explain"]}


# --- user edits -----------------------------------------------------------------------------------


async def test_a_user_edit_merges_by_the_same_rules_and_returns_warnings(api: Api) -> None:
    story = await api.story()
    user, _ = await api.turn(story["id"], "你好。", "嗯。")
    patch = {
        "time": "黄昏",
        "characters": {" 沈砚 ": {"affinity": 150.6, "mood": "x"}, "User": {"at": "码头"}},
        "inventory": ["船票", 3],
        "weather": "雨",
    }
    edited = await api.call("PATCH", f"/v1/stories/{story['id']}/scene", {"patch": patch})
    assert edited["state"]["characters"]["沈砚"]["affinity"] == 100  # matched to the card's spelling, clamped
    assert edited["state"]["inventory"] == ["船票"] and edited["state"]["time"] == "黄昏"
    assert any("unknown field weather" in w for w in edited["warnings"])
    assert any("inventory: dropped 1 non-string" in w for w in edited["warnings"])
    assert [p["author"] for p in edited["patches"]] == ["user"]
    assert edited["patches"][0]["warnings"] == edited["warnings"]
    assert edited["roster"]["places"] == {"码头": "黄昏"}

    roster = await api.call(
        "PATCH", f"/v1/stories/{story['id']}/scene", {"patch": {"roster": {"places": {"码头": None, "北屿": "远古"}}}}
    )
    assert roster["roster"]["places"] == {"码头": "黄昏", "北屿": "远古"}  # an entry still on stage comes back
    earlier = await api.call("PATCH", f"/v1/stories/{story['id']}/scene", {"patch": {"location": "北屿"}, "at": user})
    assert earlier["at"] == user
    now = await scene(api, story["id"])  # the edit above the leaf shows through the later patches
    assert now["state"]["location"] == "北屿" and now["state"]["time"] == "黄昏"


async def test_a_user_edit_that_applies_nothing_is_refused_whole(api: Api, story: dict[str, Any]) -> None:
    problem = await api.call("PATCH", f"/v1/stories/{story['id']}/scene", {"patch": {"weather": "雨"}}, status=422)
    assert problem["errors"][0]["field"] == "body.patch" and "unknown field weather" in problem["detail"]
    await api.call("PATCH", f"/v1/stories/{story['id']}/scene", {"patch": []}, status=422)
    assert (await scene(api, story["id"]))["patches"] == []


async def test_scene_and_jobs_belong_to_their_tenant(api: Api, story: dict[str, Any], make_client: MakeClient) -> None:
    other = api_for(api.client, OTHER_TENANT)
    await other.call("GET", f"/v1/stories/{story['id']}/scene", status=404)
    await other.call("PATCH", f"/v1/stories/{story['id']}/scene", {"patch": {"time": "x"}}, status=404)
    await other.call("GET", f"/v1/jobs?story_id={story['id']}", status=404)
    await api.turn(story["id"], "你好。", "嗯。")
    await settled(api, story["id"])
    assert await other.call("GET", "/v1/jobs") == {"items": [], "next_cursor": None}
    assert len((await api.call("GET", "/v1/jobs"))["items"]) == 1
    problem = await api.call("GET", "/v1/jobs?status=stuck", status=422)
    assert problem["errors"][0]["field"] == "query.status"


async def test_engine_turns_are_scribed_and_the_next_turn_sees_the_scene(
    fake: FakeModelServer, side: FakeModelServer, make_engine: Any
) -> None:
    engine = await make_engine(side_model=side_model(side), **FAST_JOBS)
    side.fallback = by_marker({"七年": LIGHTHOUSE})
    fake.script(Text("七年。"), Text("够烧到渡船来。"))
    story = await engine.story()
    first = await engine.call("POST", f"/v1/stories/{story['id']}/turns", {"text": "你一个人守了多久？"}, 201)
    reply = first["reply"]["id"]
    assert (await settled(engine, story["id"], [reply]))[reply]["status"] == "done"
    await engine.call("POST", f"/v1/stories/{story['id']}/turns", {"text": "油够吗？"}, 201)
    sent = fake.requests[-1]["messages"][-1]["content"]
    assert sent.startswith("【世界状态】\n时间：第一夜\n地点：灯塔") and sent.endswith("油够吗？")


async def test_jobs_of_a_deleted_story_are_not_listed(api: Api) -> None:
    story = await api.story()
    await api.turn(story["id"], "你好。", "嗯。")
    assert len((await api.call("GET", "/v1/jobs"))["items"]) == 1
    await api.call("DELETE", f"/v1/stories/{story['id']}", status=204)
    assert (await api.call("GET", "/v1/jobs"))["items"] == []
