"""A chat import that cannot be made is a 4xx problem at its field with nothing stored: a broken file, a
missing card or body, another tenant's card, or a file over the import limit, declared or streamed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import TENANT, Api, MakeClient, api_for
from tests.e2e.chat_import_support import (
    CHAT,
    GREETINGS,
    SHORT,
    header,
    imported,
    jsonl,
    keeper,
    message,
    story_count,
)

PROBLEM = "application/problem+json"


async def refused(
    api: Api, path: str, raw: bytes, status: int, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    async with api.client.post(path, data=raw, headers={**api.headers, **(headers or {})}) as response:
        problem: dict[str, Any] = await response.json(content_type=None)
        assert (response.status, response.content_type) == (status, PROBLEM), problem
    assert problem["status"] == status
    return problem


def fields(problem: dict[str, Any]) -> list[str]:
    return [e["field"] for e in problem["errors"]]


BAD_FILES = [
    ("not-json", b"this is not a chat\nnor JSON at all", "body.file", "no messages"),
    (
        "mes-not-a-string",
        jsonl(header(), message(GREETINGS[0], 0, user=False), message("hi", 1, user=True) | {"mes": 42}),
        "body.line 3.mes",
        "a string expected",
    ),
    ("header-only", jsonl(header()), "body.file", "no messages"),
    ("swipes-not-strings", jsonl(header(), message("a", 0, user=False) | {"swipes": ["a", 1]}),
     "body.line 2.swipes[1]", "string"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "field", "reason"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
async def test_a_broken_chat_is_refused_at_its_field_and_nothing_is_stored(
    api: Api, raw: bytes, field: str, reason: str
) -> None:
    card = await keeper(api)
    problem = await refused(api, f"/v1/stories/import?card_id={card['id']}", raw, 422)
    assert fields(problem) == [field] and reason in problem["detail"]
    assert await story_count(api, card["id"]) == 0


async def test_an_import_without_a_card_or_body_is_refused_at_its_field(api: Api) -> None:
    card = await keeper(api)
    problem = await refused(api, "/v1/stories/import", CHAT, 422)
    assert fields(problem) == ["query.card_id"]
    problem = await refused(api, f"/v1/stories/import?card_id={card['id']}", b"", 422)
    assert fields(problem) == ["body"]
    assert await story_count(api, card["id"]) == 0


async def test_a_card_of_another_tenant_is_not_found(api: Api, other: Api) -> None:
    card = await keeper(other)
    await refused(api, f"/v1/stories/import?card_id={card['id']}", CHAT, 404)
    assert await story_count(other, card["id"]) == 0
    assert (await api.call("GET", "/v1/stories?limit=500"))["items"] == []


async def test_a_chat_over_the_import_limit_is_413_whether_declared_or_streamed(make_client: MakeClient) -> None:
    api = api_for(await make_client(import_max_bytes=1024), TENANT)
    card = await keeper(api)
    big = jsonl(header(), message(GREETINGS[0], 0, user=False), message("x" * 2000, 1, user=True))
    path = f"/v1/stories/import?card_id={card['id']}"
    problem = await refused(api, path, big, 413)  # Content-Length over the limit: refused unread
    assert "1024" in problem["detail"]

    async def chunks() -> Any:
        for start in range(0, len(big), 256):
            yield big[start : start + 256]

    async with api.client.post(path, data=chunks(), headers=api.headers) as response:  # no Content-Length
        problem = await response.json(content_type=None)
        assert (response.status, response.content_type) == (413, PROBLEM), problem
    assert fields(problem) == ["body"]
    assert await story_count(api, card["id"]) == 0
    assert len(SHORT) < 1024
    await imported(api, card["id"], SHORT)  # under the limit: imported
    assert await story_count(api, card["id"]) == 1
