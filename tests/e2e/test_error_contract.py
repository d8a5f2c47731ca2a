"""The API error contract: RFC 9457 problem+json with field paths, and the right status for each failure."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from tests.builders import Api, MakeClient, api_for

PROBLEM = "application/problem+json"
UNKNOWN = str(uuid4())


async def problem_of(response: ClientResponse, status: int) -> dict[str, Any]:
    body: dict[str, Any] = await response.json(content_type=None)
    assert (response.status, response.content_type) == (status, PROBLEM), body
    assert (body["status"], set(body)) == (status, {"type", "title", "status", "detail", "errors"})
    return body


def fields(problem: dict[str, Any]) -> list[str]:
    return [e["field"] for e in problem["errors"]]


CASES = [
    ("POST", "/v1/stories/{story}/nodes", {"kind": "user", "text": ""}, 422, "body.text"),
    ("POST", "/v1/stories/{story}/nodes", {"kind": "user", "text": "  "}, 422, "body.text"),
    ("POST", "/v1/stories/{story}/nodes", {"kind": "narrator", "text": "你好"}, 422, "body.kind"),
    ("POST", "/v1/stories/{story}/nodes", {"kind": "user", "text": "你好", "mood": 1}, 422, "body.mood"),
    ("POST", "/v1/stories/{story}/nodes", {"kind": "reply", "text": "你好"}, 422, "body.parent_id"),
    ("POST", "/v1/stories/{story}/nodes", {"kind": "user", "text": "你好", "parent_id": UNKNOWN}, 404, "body.parent_id"),
    ("POST", "/v1/stories", {"card_id": "{card}", "greeting_index": 9}, 422, "body.greeting_index"),
    ("POST", "/v1/stories", {"card_id": "{card}", "settings": {"context_window": 1}}, 422,
         "body.settings.context_window"),
    ("POST", "/v1/cards", {"card": {"name": ""}}, 422, "body.card.name"),
    ("GET", "/v1/stories/{story}/context?at=not-a-uuid", None, 422, "query.at"),
    ("GET", "/v1/stories/{story}/search?q=", None, 422, "query.q"),
    ("GET", "/v1/stories/{story}/tree?limit=0", None, 422, "query.limit"),
    ("GET", f"/v1/stories/{UNKNOWN}", None, 404, None),
    ("GET", f"/v1/cards/{UNKNOWN}", None, 404, None),
    ("GET", f"/v1/nodes/{UNKNOWN}", None, 404, None),
    ("GET", "/v1/stories/{story}/context?at=" + UNKNOWN, None, 404, "query.at"),
    ("GET", "/v1/stories/{story}/context?at={foreign}", None, 404, "query.at"),
    ("POST", "/v1/stories/{story}/nodes", {"kind": "user", "text": "你好", "parent_id": "{foreign}"}, 404,
         "body.parent_id"),
    ("POST", "/v1/stories/{story}/checkout", {"node_id": "{foreign}"}, 404, "body.node_id"),
    ("POST", "/v1/stories/{story}/saves/nope/restore", None, 404, "path.save_id"),
    ("PATCH", "/v1/stories/{story}/worldlines/nope", {"name": "线"}, 404, "path.worldline_id"),
    ("GET", "/v1/stories/not-a-uuid", None, 404, "path.story_id"),
    ("GET", "/v1/nodes/123/children", None, 404, "path.node_id"),
    ("GET", "/v1/no-such-resource", None, 404, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"), CASES, ids=[f"{c[3]} {c[0]} {c[1]} {c[2] or ''}" for c in CASES]
)
async def test_request_is_answered_with_problem_json(
    api: Api, story: dict[str, Any], method: str, path: str, body: Any, status: int, field: str | None
) -> None:
    ids = {"story": story["id"], "card": story["card_id"], "foreign": (await api.story())["root_id"]}
    body = {k: v.format(**ids) if isinstance(v, str) else v for k, v in body.items()} if body else None
    async with api.client.request(method, path.format(**ids), json=body, headers=api.headers) as r:
        problem = await problem_of(r, status)
    assert fields(problem) == ([field] if field else [])
    assert all(e["pointer"] == "#/" + e["field"].replace(".", "/") for e in problem["errors"])


async def test_malformed_json_is_422_problem_json(api: Api, story: dict[str, Any]) -> None:
    path, headers = f"/v1/stories/{story['id']}/nodes", {**api.headers, "Content-Type": "application/json"}
    async with api.client.post(path, data=b'{"kind": "user", "text": ', headers=headers) as r:
        problem = await problem_of(r, 422)
    assert fields(problem) == ["body"]


async def test_body_over_the_limit_is_413_problem_json(make_client: MakeClient) -> None:
    api = api_for(await make_client(max_body_bytes=2048), "tenant-a")
    story = await api.story()
    body = {"kind": "user", "text": "长" * 4000}
    async with api.client.post(f"/v1/stories/{story['id']}/nodes", json=body, headers=api.headers) as r:
        await problem_of(r, 413)


async def test_stale_if_match_is_409_problem_json(api: Api, story: dict[str, Any]) -> None:
    await api.append(story["id"], "user", "先到的一句。")
    headers = {**api.headers, "If-Match": '"1"'}
    async with api.client.post(
        f"/v1/stories/{story['id']}/nodes", json={"kind": "reply", "text": "迟到的回答。"}, headers=headers
    ) as r:
        problem = await problem_of(r, 409)
    assert fields(problem) == ["header.If-Match"]


async def test_current_if_match_is_accepted(api: Api, story: dict[str, Any]) -> None:
    headers = {"If-Match": f'"{story["version"]}"'}
    answer = await api.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": "你好"}, 201, headers)
    assert answer["story_version"] == story["version"] + 1


@pytest.mark.parametrize("authorization", [None, "Bearer cj_not-a-key", "Basic dXNlcjpwYXNz", "Bearer "])
async def test_request_without_a_valid_key_is_401_problem_json(
    client: TestClient[Any, Any], authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    async with client.get("/v1/cards", headers=headers) as r:
        await problem_of(r, 401)
        assert r.headers["WWW-Authenticate"].startswith("Bearer")


async def test_health_and_openapi_need_no_key(client: TestClient[Any, Any]) -> None:
    for path in ("/healthz", "/openapi.json"):
        async with client.get(path) as r:
            assert r.status == 200
