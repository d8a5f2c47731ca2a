"""The OpenAPI document says what the server does: every declared bound of a query parameter is the one
the server enforces, required bodies are required, and the header errors are declared."""

from __future__ import annotations

import json
from typing import Any

from api.routes import ROUTES
from tests.builders import Api


async def status_of(api: Api, path: str, params: dict[str, Any]) -> tuple[int, Any]:
    async with api.client.get(path, params={k: str(v) for k, v in params.items()}, headers=api.headers) as response:
        return response.status, await response.json(content_type=None)


async def test_every_declared_query_bound_is_the_one_the_server_enforces(api: Api, story: dict[str, Any]) -> None:
    spec = await api.call("GET", "/openapi.json")
    lore = json.dumps({"entries": {"0": {"uid": 0, "key": ["ferry"], "content": "The ferry is late."}}}).encode()
    book = await api.send("POST", f"/v1/cards/{story['card_id']}/lorebooks?name=Coast", lore)
    checked = 0
    for route in ROUTES:
        path = route.path.replace("{story_id}", story["id"]).replace("{card_id}", story["card_id"])
        path = path.replace("{lorebook_id}", book["id"])
        declared = {
            p["name"]: p["schema"]
            for p in spec["paths"][route.path][route.method.lower()]["parameters"]
            if p["in"] == "query"
        }
        needs = {"q": "灯"} if "q" in route.query else {}
        for name, low, high in route.ranges:
            schema = declared[name]
            if schema["type"] == "string":
                assert (schema["minLength"], schema["maxLength"]) == (low, high)
                good, bad = "灯" * high, "灯" * (high + 1)
            else:
                assert (schema["minimum"], schema["maximum"]) == (low, high)
                good, bad = high, high + 1
            status, _ = await status_of(api, path, {**needs, name: good})
            assert status == 200, (route.path, name, good)
            status, problem = await status_of(api, path, {**needs, name: bad})
            assert status == 422 and problem["errors"][0]["field"] == f"query.{name}", (route.path, name)
            if schema["type"] == "integer":
                status, _ = await status_of(api, path, {**needs, name: low - 1})
                assert status == 422, (route.path, name, low - 1)
            checked += 1
    assert checked >= 14


async def test_a_required_body_is_required_and_an_optional_one_is_not(api: Api, story: dict[str, Any]) -> None:
    async with api.client.patch(f"/v1/stories/{story['id']}", headers=api.headers) as response:
        problem = await response.json(content_type=None)
        assert response.status == 422 and problem["errors"][0]["field"] == "body"
    async with api.client.post(f"/v1/stories/{story['id']}/saves", headers=api.headers) as response:
        assert response.status == 201  # every field has a default: no body is `{}`
    spec = await api.call("GET", "/openapi.json")
    assert spec["paths"]["/v1/stories/{story_id}"]["patch"]["requestBody"]["required"] is True
    assert spec["paths"]["/v1/stories/{story_id}/regenerate"]["post"]["requestBody"]["required"] is False
    nodes = spec["paths"]["/v1/stories/{story_id}/nodes"]["post"]
    assert "400" in nodes["responses"]
    key = next(p for p in nodes["parameters"] if p["name"] == "Idempotency-Key")
    assert key["schema"]["minLength"] == 1
