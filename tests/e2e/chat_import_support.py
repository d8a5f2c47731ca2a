"""SillyTavern chats for the chat import tests: one chat with every case (its expected PATH and NODES), a
SHORT one, rows built with SillyTavern's date form, and importing a chat and reading its story over HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from tests.builders import Api

USER, CHAR = "Mara", "Keeper"
GREETINGS = [
    "The door bangs open in the wind. The ferry comes in three days.",
    "The lamp is lit. Somewhere below, the sea keeps time.",
    "Fog rolls in over the rocks; the keeper does not look up.",
]
START = datetime(2024, 12, 1, 15, 0, tzinfo=UTC)


def st_date(moment: datetime) -> str:
    """SillyTavern's `send_date` form: "December 1, 2024 3:04pm"."""
    half = "pm" if moment.hour >= 12 else "am"
    return f"{moment:%B} {moment.day}, {moment.year} {moment.hour % 12 or 12}:{moment.minute:02d}{half}"


def at(minute: int) -> datetime:
    return START + timedelta(minutes=minute)


def header(**metadata: Any) -> dict[str, Any]:
    return {
        "user_name": USER,
        "character_name": CHAR,
        "create_date": "2024-12-01@15h00m00s",
        "chat_metadata": {"note_prompt": "Storm season.", **metadata},
    }


def message(text: str, minute: int, *, user: bool, hidden: bool = False, **fields: Any) -> dict[str, Any]:
    return {
        "name": USER if user else CHAR,
        "is_user": user,
        "is_system": hidden,
        "send_date": st_date(at(minute)),
        "mes": text,
        "extra": {},
    } | fields


def swiped(texts: list[str], chosen: int, first: int) -> dict[str, Any]:
    """A reply showing swipe `chosen`; swipe i was written at minute `first + i` (its swipe_info)."""
    info: list[dict[str, Any]] = [
        {"send_date": st_date(at(first + i)), "gen_started": None, "gen_finished": None, "extra": {}}
        for i in range(len(texts))
    ]
    return message(texts[chosen], first + chosen, user=False, swipes=texts, swipe_id=chosen, swipe_info=info)


def jsonl(*rows: dict[str, Any]) -> bytes:
    return b"\n".join(orjson.dumps(row) for row in rows)


R2_SWIPES = ["R2: first try.", "R2: second try.", "R2: the logbook is in the drawer.", "R2: fourth try."]
R6_SWIPES = ["R6: the ferry, at last.", "R6: no ferry today either."]

# One chat with every case: the greeting's swipes, swiped replies, runs joined, a hidden pair; line 1 the header.
ROWS = [
    header(),
    message(GREETINGS[1], 0, user=False) | {"swipes": GREETINGS, "swipe_id": 1},
    message("U1: Who keeps the light?", 1, user=True),
    message("R1: I do, and have for seven years.", 2, user=False),
    message("U2: Show me the logbook.", 3, user=True),
    swiped(R2_SWIPES, 2, 4),  # swipes written at minutes 4..7, the chosen one at 6
    message("U3: What was that noise?", 8, user=True),
    message("R3: The shutters.", 9, user=False),
    message("R3: Or the gulls.", 10, user=False),  # two replies in a row: joined
    message("U4: I will check the stairs.", 11, user=True),
    message("U4: Hand me the lantern.", 12, user=True),  # two user messages in a row: joined
    message("R4: Mind the seventh step.", 13, user=False),
    message("(OOC) brb, dinner", 14, user=True, hidden=True),  # a hidden pair
    message("(OOC) sure", 15, user=False, hidden=True),
    message("U5: Back. Is the ferry late?", 16, user=True),
    message("R5: It always is.", 17, user=False),
    message("U6: Then we wait.", 18, user=True),
    swiped(R6_SWIPES, 1, 19),  # the last message: swipes at minutes 19, 20
]
PATH = [  # (kind, text, minute, hidden) of the imported path after the root
    ("user", "U1: Who keeps the light?", 1, False),
    ("reply", "R1: I do, and have for seven years.", 2, False),
    ("user", "U2: Show me the logbook.", 3, False),
    ("reply", R2_SWIPES[2], 6, False),
    ("user", "U3: What was that noise?", 8, False),
    ("reply", "R3: The shutters.\n\nR3: Or the gulls.", 10, False),
    ("user", "U4: I will check the stairs.\n\nU4: Hand me the lantern.", 12, False),
    ("reply", "R4: Mind the seventh step.", 13, False),
    ("user", "(OOC) brb, dinner", 14, True),
    ("reply", "(OOC) sure", 15, True),
    ("user", "U5: Back. Is the ferry late?", 16, False),
    ("reply", "R5: It always is.", 17, False),
    ("user", "U6: Then we wait.", 18, False),
    ("reply", R6_SWIPES[1], 20, False),
]
CHAT = jsonl(*ROWS)
NODES = 1 + len(PATH) + (len(R2_SWIPES) - 1) + (len(R6_SWIPES) - 1)
# A short chat that ends on the user's words: for the tests whose subject is the request, not the tree.
SHORT = jsonl(header(), message(GREETINGS[0], 0, user=False), message("Is the ferry late?", 1, user=True))


async def keeper(api: Api) -> dict[str, Any]:
    return await api.card(name=CHAR, first_mes=GREETINGS[0], alternate_greetings=GREETINGS[1:])


async def imported(api: Api, card_id: str, raw: bytes = CHAT, **headers: str) -> dict[str, Any]:
    answer: dict[str, Any] = await api.send("POST", f"/v1/stories/import?card_id={card_id}", raw, headers=headers)
    return answer


async def path_of(api: Api, story_id: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = (await api.call("GET", f"/v1/stories/{story_id}/path"))["nodes"]
    return nodes


async def tree_of(api: Api, story_id: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = (await api.call("GET", f"/v1/stories/{story_id}/tree?limit=5000"))["nodes"]
    return nodes


async def siblings_of(api: Api, node_id: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = (await api.call("GET", f"/v1/nodes/{node_id}/siblings"))["nodes"]
    return nodes


async def story_count(api: Api, card_id: str) -> int:
    return len((await api.call("GET", f"/v1/stories?card_id={card_id}&limit=500"))["items"])


def moment(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)
