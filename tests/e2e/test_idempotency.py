"""Idempotency keys on creating POSTs: a retry gets the stored answer; a reused key with another body is 422."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.builders import Api, a_card

pytestmark = pytest.mark.both_stores

CARD = {"card": a_card().model_dump()}


async def post_card(api: Api, key: str, body: Any = CARD) -> tuple[int, str, bytes]:
    headers = {**api.headers, "Idempotency-Key": key}
    async with api.client.post("/v1/cards", json=body, headers=headers) as r:
        return r.status, r.content_type, await r.read()


async def card_ids(api: Api) -> list[str]:
    return [c["id"] for c in (await api.call("GET", "/v1/cards"))["items"]]


async def test_same_key_and_body_get_the_same_answer_and_one_card(api: Api) -> None:
    first = await post_card(api, "create-lighthouse")
    again = await post_card(api, "create-lighthouse")
    assert first[0] == 201 and again == first
    assert len(await card_ids(api)) == 1


async def test_same_key_and_body_sent_concurrently_create_one_card(api: Api) -> None:
    answers = await asyncio.gather(*(post_card(api, "create-lighthouse") for _ in range(4)))
    assert {a[0] for a in answers} == {201} and len(set(answers)) == 1
    assert len(await card_ids(api)) == 1


async def test_same_key_with_another_body_is_422_problem_json(api: Api) -> None:
    await post_card(api, "create-lighthouse")
    status, content_type, _ = await post_card(api, "create-lighthouse", {"card": {"name": "别的卡"}})
    assert (status, content_type) == (422, "application/problem+json")
    assert len(await card_ids(api)) == 1


async def test_different_keys_create_different_cards(api: Api) -> None:
    await post_card(api, "one")
    await post_card(api, "two")
    assert len(await card_ids(api)) == 2


async def test_same_key_is_separate_per_tenant(api: Api, other: Api) -> None:
    mine, theirs = await post_card(api, "create-lighthouse"), await post_card(other, "create-lighthouse")
    assert (mine[0], theirs[0]) == (201, 201) and mine[2] != theirs[2]
    assert len(await card_ids(other)) == 1


async def test_retried_append_adds_one_node(api: Api, story: dict[str, Any]) -> None:
    headers = {"Idempotency-Key": "turn-1"}
    path = f"/v1/stories/{story['id']}/nodes"
    first = await api.call("POST", path, {"kind": "user", "text": "你好"}, 201, headers)
    again = await api.call("POST", path, {"kind": "user", "text": "你好"}, 201, headers)
    tree = await api.call("GET", f"/v1/stories/{story['id']}/tree")
    assert again == first and len(tree["nodes"]) == 2


async def test_a_replayed_answer_keeps_its_etag(api: Api) -> None:
    headers = {**api.headers, "Idempotency-Key": "card-with-etag"}
    tags = []
    for _ in range(2):
        async with api.client.post("/v1/cards", json=CARD, headers=headers) as r:
            tags.append((r.status, r.headers.get("ETag"), r.headers.get("Idempotent-Replayed")))
    assert tags == [(201, '"1"', None), (201, '"1"', "true")]


async def test_same_key_with_another_if_match_is_422(api: Api, story: dict[str, Any]) -> None:
    path = f"/v1/stories/{story['id']}/nodes"
    body = {"kind": "user", "text": "同一句话"}
    first = {**api.headers, "Idempotency-Key": "append-once", "If-Match": f'"{story["version"]}"'}
    again = {**first, "If-Match": '"999"'}
    async with api.client.post(path, json=body, headers=first) as r:
        assert r.status == 201
    async with api.client.post(path, json=body, headers=again) as r:
        assert r.status == 422
