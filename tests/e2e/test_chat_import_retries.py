"""A chat import retried with its Idempotency-Key answers the same story and stores one; the key reused for
another card is refused."""

from __future__ import annotations

from tests.builders import Api
from tests.e2e.chat_import_support import SHORT, imported, keeper, story_count


async def test_a_keyed_retry_answers_the_same_story_and_stores_one(api: Api) -> None:
    card = await keeper(api)
    key = {"Idempotency-Key": "chat-import-1"}
    first = await imported(api, card["id"], SHORT, **key)
    second = await imported(api, card["id"], SHORT, **key)
    assert second["story"]["id"] == first["story"]["id"] and second == first
    assert await story_count(api, card["id"]) == 1
    third = await imported(api, card["id"], SHORT)  # no key: a new story
    assert third["story"]["id"] != first["story"]["id"]
    assert await story_count(api, card["id"]) == 2


async def test_a_reused_key_for_another_card_is_refused(api: Api) -> None:
    card, other_card = await keeper(api), await keeper(api)
    key = {"Idempotency-Key": "chat-import-2"}
    first = await imported(api, card["id"], SHORT, **key)
    assert first["story"]["card_id"] == card["id"]
    async with api.client.post(
        f"/v1/stories/import?card_id={other_card['id']}", data=SHORT, headers={**api.headers, **key}
    ) as response:
        answer = await response.json(content_type=None)
    assert await story_count(api, other_card["id"]) == 0
    assert response.status == 422, answer  # not a story of the first card
