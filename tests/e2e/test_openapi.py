"""/openapi.json: OpenAPI 3.1 generated from the route table and the pydantic models."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from api.routes import ROUTES


@pytest.fixture
async def document(client: TestClient[Any, Any]) -> dict[str, Any]:
    async with client.get("/openapi.json") as r:
        assert r.status == 200
        data: dict[str, Any] = await r.json()
        return data


def refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref":
                yield item
            else:
                yield from refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from refs(item)


def resolve(document: dict[str, Any], ref: str) -> Any:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def test_openapi_version_is_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"] == "3.1.0"


@pytest.mark.parametrize("route", ROUTES, ids=[f"{r.method} {r.path}" for r in ROUTES])
def test_openapi_lists_every_route_with_its_method(document: dict[str, Any], route: Any) -> None:
    operation = document["paths"][route.path][route.method.lower()]
    assert str(route.status) in operation["responses"]


@pytest.mark.parametrize("route", [r for r in ROUTES if r.request], ids=lambda r: f"{r.method} {r.path}")
def test_openapi_request_schema_resolves_to_its_model(document: dict[str, Any], route: Any) -> None:
    schema = document["paths"][route.path][route.method.lower()]["requestBody"]["content"]["application/json"]["schema"]
    assert schema["$ref"] == f"#/components/schemas/{route.request.__name__}"
    assert resolve(document, schema["$ref"])["type"] == "object"


def test_openapi_every_ref_resolves_into_components(document: dict[str, Any]) -> None:
    found = set(refs(document))
    assert found and all(ref.startswith("#/components/schemas/") for ref in found)
    for ref in found:
        resolve(document, ref)


def test_openapi_documents_no_route_that_is_not_served(document: dict[str, Any]) -> None:
    documented = {(path, method.upper()) for path, ops in document["paths"].items() for method in ops}
    assert documented == {(r.path, r.method) for r in ROUTES}
