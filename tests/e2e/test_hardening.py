"""Defects found by probing the running service from outside, each pinned by a test: a tree preview
that stopped at a NUL, …"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from providers.fake_server import FakeModelServer, Text
from tests.builders import Api, MakeClient, api_for
from tests.scene_support import FAST_JOBS, side_model


async def test_a_tree_preview_keeps_every_character_a_nul_included(api: Api, story: dict[str, Any]) -> None:
    text = "前\u0000后 tail"
    await api.append(story["id"], "user", text)
    long = "灯" * 79 + "塔" * 10  # cut at 80 characters, multi-byte ones whole
    await api.append(story["id"], "reply", long)
    tree = await api.call("GET", f"/v1/stories/{story['id']}/tree")
    previews = [n["preview"] for n in tree["nodes"]]
    assert previews[-2:] == [text, long[:80]]


async def test_each_checkout_answers_with_the_leaf_and_version_its_own_commit_made(
    api: Api, story: dict[str, Any]
) -> None:
    nodes = []
    for i in range(4):
        nodes.append((await api.append(story["id"], "user", f"第{i}问", story["root_id"]))["node"]["id"])
    asked = [nodes[i % 4] for i in range(16)]
    answers = await asyncio.gather(
        *(api.call("POST", f"/v1/stories/{story['id']}/checkout", {"node_id": node}) for node in asked)
    )
    assert [a["leaf_id"] for a in answers] == asked  # never the leaf someone else moved to meanwhile
    final = await api.call("GET", f"/v1/stories/{story['id']}")
    assert final["version"] == max(a["story_version"] for a in answers)


def append_head(api: Api, story_id: str) -> bytes:
    """A node append's request head, up to the value of its Content-Length."""
    return (
        b"POST /v1/stories/" + story_id.encode() + b"/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: "
        + api.headers["Authorization"].encode() + b"\r\nContent-Type: application/json\r\nContent-Length: "
    )  # fmt: skip


async def raw_request(client_port: int, head: bytes) -> tuple[int, bytes]:
    """Send raw request bytes (headers no client library would send) and read the answer's status line
    and body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", client_port)
    writer.write(head)
    await writer.drain()
    try:
        answer = await asyncio.wait_for(reader.read(65536), 10)
    finally:
        writer.close()
        await writer.wait_closed()
    status = int(answer.split(b" ", 2)[1])
    return status, answer.split(b"\r\n\r\n", 1)[1]


async def test_header_bytes_that_are_not_utf8_are_refused_not_500(api: Api, story: dict[str, Any]) -> None:
    port = api.client.server.port
    assert port is not None
    path = f"/v1/stories/{story['id']}".encode()
    status, _ = await raw_request(
        port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\r\n\r\n"
    )
    assert status == 401
    body = b'{"kind": "user", "text": "hi"}'
    head = (
        b"POST " + path + b"/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: " + api.headers["Authorization"].encode()
        + b"\r\nIdempotency-Key: caf\xe9\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode() + b"\r\n\r\n" + body
    )  # fmt: skip
    status, answer = await raw_request(port, head)
    assert status == 400 and b"Idempotency-Key" in answer


async def test_browsers_of_allowed_origins_may_call_the_api_and_others_may_not(make_client: MakeClient) -> None:
    client = await make_client(cors_origins=["https://play.example"])
    api = api_for(client, "tenant-a")
    story = await api.story()
    path = f"/v1/stories/{story['id']}/nodes"
    asked = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
    preflight = await client.options(path, headers={"Origin": "https://play.example", **asked})  # no key
    assert preflight.status == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://play.example"
    assert "AUTHORIZATION" in preflight.headers["Access-Control-Allow-Headers"].upper()
    answer = await client.get(f"/v1/stories/{story['id']}", headers={**api.headers, "Origin": "https://play.example"})
    assert answer.status == 200 and answer.headers["Access-Control-Allow-Origin"] == "https://play.example"
    assert "ETAG" in answer.headers["Access-Control-Expose-Headers"].upper()
    stranger = await client.options(path, headers={"Origin": "https://evil.example", **asked})
    assert stranger.status == 403 and "Access-Control-Allow-Origin" not in stranger.headers


async def test_without_allowed_origins_a_preflight_gets_no_cors_answer(api: Api, story: dict[str, Any]) -> None:
    asked = {"Origin": "https://play.example", "Access-Control-Request-Method": "POST"}
    preflight = await api.client.options(f"/v1/stories/{story['id']}/nodes", headers=asked)
    assert "Access-Control-Allow-Origin" not in preflight.headers


async def test_a_client_sees_running_jobs_asks_for_several_statuses_and_waits_on_one_story_view(
    fake: FakeModelServer, make_client: MakeClient
) -> None:
    fake.fallback = lambda body: Text("{}", delay=1.0)  # type: ignore[assignment]  # a slow side model
    api = api_for(await make_client(side_model=side_model(fake), **FAST_JOBS), "tenant-a")
    story = await api.story()
    _, reply = await api.turn(story["id"], "灯还亮着吗？", "亮着。")
    deadline = asyncio.get_running_loop().time() + 10
    while True:  # the scribe's job is picked up, then runs for a second
        view = await api.call("GET", f"/v1/stories/{story['id']}/jobs")
        if view["counts"]["running"] or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.02)
    assert view["counts"]["running"] == 1 and view["settled"] is False
    running = await api.call("GET", f"/v1/jobs?story_id={story['id']}&status=running")
    assert [(j["node_id"], j["status"]) for j in running["items"]] == [(reply, "running")]
    pending = await api.call("GET", f"/v1/jobs?story_id={story['id']}&status=pending")
    assert pending["items"] == []  # a running job is not also pending
    while not view["settled"] and asyncio.get_running_loop().time() < deadline + 10:
        await asyncio.sleep(0.05)
        view = await api.call("GET", f"/v1/stories/{story['id']}/jobs")
    assert view["settled"] and view["counts"]["running"] == 0
    ended = await api.call("GET", f"/v1/jobs?story_id={story['id']}&status=done,skipped&status=failed")
    assert [j["node_id"] for j in ended["items"]] == [reply]
    await api.call("GET", "/v1/jobs?status=done,nonsense", status=422)


async def test_a_deleted_story_takes_if_match_and_comes_back_as_it_was(api: Api, story: dict[str, Any]) -> None:
    sid = story["id"]
    user, reply = await api.turn(sid, "地下室里有什么？", "“一箱旧银币。”")
    before = await api.call("GET", f"/v1/stories/{sid}")
    await api.call("DELETE", f"/v1/stories/{sid}", status=409, headers={"If-Match": '"1"'})  # a stale version
    await api.call("DELETE", f"/v1/stories/{sid}", status=204, headers={"If-Match": f'"{before["version"]}"'})
    await api.call("GET", f"/v1/stories/{sid}", status=404)
    listed = await api.call("GET", "/v1/stories")
    assert sid not in [s["id"] for s in listed["items"]]
    deleted = await api.call("GET", "/v1/stories?deleted=true")
    assert [s["id"] for s in deleted["items"]] == [sid]

    back = await api.call("POST", f"/v1/stories/{sid}/restore")
    assert back["leaf_id"] == reply and back["version"] == before["version"] + 2
    path = await api.call("GET", f"/v1/stories/{sid}/path")
    assert [n["id"] for n in path["nodes"]][-2:] == [user, reply]
    found = await api.call("GET", f"/v1/stories/{sid}/recall?q=银币")
    assert [h["node_id"] for h in found["hits"]] == [reply]  # its memory came back with it
    assert (await api.call("GET", "/v1/stories?deleted=true"))["items"] == []
    again = await api.call("POST", f"/v1/stories/{sid}/restore")  # not deleted: as it stands
    assert again["version"] == back["version"]


async def test_parser_refusals_are_problem_json_and_never_repeat_the_key(
    api: Api, story: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    port = api.client.server.port
    assert port is not None
    secret = api.headers["Authorization"].removeprefix("Bearer ").encode()
    bad = [
        b"GET /v1/stories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + b"\x01\r\n\r\n",
        b"GET /v1/stories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + b"\x00\r\n\r\n",
        b"GET /v1/stories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + b" " * 9000 + b"\r\n\r\n",
    ]
    with caplog.at_level(logging.DEBUG):
        answers = [await raw_request(port, head) for head in bad]
    assert [status for status, _ in answers] == [400, 400, 431]
    for _, answer in answers:
        assert secret not in answer and json.loads(answer)["status"] in (400, 431)
    assert secret.decode() not in caplog.text and "Traceback" not in caplog.text


async def test_a_body_declared_too_large_is_refused_at_once_and_a_stalled_one_times_out(
    make_client: MakeClient,
) -> None:
    client = await make_client(body_seconds=0.5)
    api = api_for(client, "tenant-a")
    story = await api.story()
    port = client.server.port
    assert port is not None
    head = append_head(api, story["id"])
    started = asyncio.get_running_loop().time()
    status, answer = await raw_request(port, head + b"10000000000\r\n\r\n")  # nothing of it sent
    assert status == 413 and json.loads(answer)["status"] == 413
    status, answer = await raw_request(port, head + b'40\r\n\r\n{"kind": ')  # a body that stops coming
    assert status == 408 and json.loads(answer)["errors"][0]["field"] == "body"
    assert asyncio.get_running_loop().time() - started < 5
    assert (await api.call("GET", f"/v1/stories/{story['id']}/path"))["nodes"][-1]["kind"] == "greeting"


async def test_a_method_the_path_does_not_take_is_a_405_that_says_which_it_does(
    api: Api, story: dict[str, Any]
) -> None:
    response = await api.client.put(f"/v1/stories/{story['id']}", headers=api.headers)
    assert response.status == 405 and response.content_type == "application/problem+json"
    assert set(response.headers["Allow"].split(", ")) >= {"GET", "PATCH", "DELETE"}


async def closed_after(port: int, raw: bytes, wait: float = 8.0) -> float:
    """Seconds until the server closes the connection after `raw` (its answer read and dropped)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    started = asyncio.get_running_loop().time()
    try:
        while await asyncio.wait_for(reader.read(65536), wait):
            pass
    finally:
        writer.close()
        await writer.wait_closed()
    return asyncio.get_running_loop().time() - started


async def test_a_refused_body_ends_its_connection_soon_and_an_abandoned_upload_logs_no_traceback(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(body_seconds=0.3)
    api = api_for(client, "tenant-a")
    story = await api.story()
    port = client.server.port
    assert port is not None
    head = append_head(api, story["id"])
    assert await closed_after(port, head + b"10000000000\r\n\r\n") < 3  # 413, not read for seconds after
    assert await closed_after(port, head + b'40\r\n\r\n{"kind": ') < 3  # 408 after 0.3 s, then closed
    with caplog.at_level(logging.INFO):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + b'400\r\n\r\n{"kind": "user", ')
        await writer.drain()
        writer.close()  # gone mid-body
        await writer.wait_closed()
        deadline = asyncio.get_running_loop().time() + 5
        while "went away" not in caplog.text and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)  # until the server has heard the client go
    assert "went away before its request body arrived" in caplog.text
    assert "Traceback" not in caplog.text and "unhandled error" not in caplog.text
