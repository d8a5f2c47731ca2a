"""Cards with lorebooks for the engine-mode lore tests, and reading a turn's tools, its context and the supplement."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from domain.card.commands.lore import supplement_id
from providers.fake_server import FakeModelServer, ToolCalls
from tests.builders import Api, a_card
from tests.fake_model import calls, messages_of, post_turn, seal, write

ENGLISH_CARD: dict[str, Any] = {
    "name": "Mira",
    "description": "{{char}} is a ranger who guards the valley roads.",
    "first_mes": "The campfire crackles. “{{user}}, you are late.”",
    "alternate_greetings": [],
    "character_book": {
        "name": "Valley lore",
        "entries": [
            {
                "id": 0, "keys": ["Eldwood"], "comment": "The Eldwood", "enabled": True, "insertion_order": 10,
                "content": "An old forest east of the river; its trees whisper at night.",
            },
            {
                "id": 1, "keys": ["Grey Tower", "watchtower"], "comment": "The Grey Tower", "enabled": True,
                "insertion_order": 20, "content": "A ruined watchtower where the wardens once kept the signal fire.",
            },
            {
                "id": 2, "keys": ["wyvern", "wyverns"], "comment": "Wyverns", "enabled": True, "insertion_order": 30,
                "content": "Winged beasts that nest on the northern cliffs; they fear smoke.",
            },
            {
                "id": 3, "keys": [], "comment": "The Pact", "constant": True, "enabled": True, "insertion_order": 0,
                "content": "Rangers never draw steel before the council of elders.",
            },
        ],
    },
}  # fmt: skip
TOWER = "A ruined watchtower where the wardens once kept the signal fire."
PACT = "Rangers never draw steel before the council of elders."

CHINESE_BOOK: dict[str, Any] = {
    "name": "北屿设定",
    "entries": [
        {
            "id": 0, "keys": ["怪兽"], "comment": "雾林怪兽", "enabled": True, "insertion_order": 10,
            "content": "雾林深处住着一头独眼怪兽，只在月圆之夜出没。",
        },
        {
            "id": 1, "keys": ["灯塔"], "comment": "北屿灯塔", "enabled": True, "insertion_order": 20,
            "content": "灯塔建于百年前，灯油每月由渡船运来。",
        },
        {
            "id": 2, "keys": ["盐田"], "comment": "南岸盐田", "enabled": True, "insertion_order": 30,
            "content": "南岸的盐田归村长家所有。",
        },
    ],
}  # fmt: skip
MONSTER = "雾林深处住着一头独眼怪兽，只在月圆之夜出没。"

ZHOU: dict[str, Any] = {"title": "渡船老周", "keys": ["老周"], "content": "老周是北屿渡船的船夫，左手少了两根手指。"}
ZHOU_WORDS = "老周今天会来码头吗？"


async def english_card(api: Api) -> str:
    return str((await api.card(**ENGLISH_CARD))["id"])


async def chinese_card(api: Api, **settings: Any) -> str:
    body = {"card": {**a_card().model_dump(), "character_book": CHINESE_BOOK}, "settings": settings}
    return str((await api.call("POST", "/v1/cards", body, 201))["id"])


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in messages_of(request, "tool")]


def last_user(request: dict[str, Any]) -> str:
    return str(messages_of(request, "user")[-1]["content"])


def system_of(request: dict[str, Any]) -> str:
    return str(messages_of(request, "system")[0]["content"])


def results(turn: dict[str, Any], name: str) -> list[tuple[bool, str]]:
    return [(t["ok"], t["result"]) for t in turn["tools"] if t["name"] == name]


def everything(context: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in context["messages"])


def lore_block(context: dict[str, Any]) -> dict[str, Any] | None:
    return next((b for b in context["explain"] if b["what"] == "lore"), None)


async def context_at(api: Api, story_id: str, at: str | None = None) -> dict[str, Any]:
    query = f"?at={at}" if at else ""
    data: dict[str, Any] = await api.call("GET", f"/v1/stories/{story_id}/context{query}")
    return data


async def supplement(api: Api, card_id: str) -> dict[str, Any]:
    book_id = supplement_id(UUID(card_id))
    data: dict[str, Any] = await api.call("GET", f"/v1/cards/{card_id}/lorebooks/{book_id}")
    return data


def written(fields: dict[str, Any], reply: str = "“船夫老周明天来。”") -> ToolCalls:
    """One round: the model records an entry, writes its reply and seals it."""
    return calls(("lorebook_write", fields), write(0, reply), seal(1))


async def write_zhou(
    fake: FakeModelServer, api: Api, story_id: str, words: str = "码头上那个人是谁？"
) -> dict[str, Any]:
    fake.script(written(ZHOU))
    turn = await post_turn(api, story_id, words)
    assert turn["outcome"] == "sealed"
    return turn
