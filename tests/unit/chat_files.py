"""SillyTavern chat lines for the chat file tests: a header, a greeting with swipes, `user` and `reply`
messages, `jsonl` to make a file of them, and FULL_CHAT, one file with every case."""

from __future__ import annotations

from typing import Any

import orjson

HEADER = {
    "user_name": "Mara",
    "character_name": "Keeper",
    "create_date": "2024-12-01@15h00m00s",
    "chat_metadata": {"note_prompt": "Storm season.", "tainted": False},
}
GREETING = {
    "name": "Keeper",
    "is_user": False,
    "is_system": False,
    "send_date": "December 1, 2024 3:00pm",
    "mes": "The lamp is lit.",
    "extra": {},
    "swipes": ["The door creaks.", "The lamp is lit.", "Fog rolls in."],
    "swipe_id": 1,
}
SWIPED_REPLY = {
    "name": "Keeper",
    "is_user": False,
    "send_date": "December 1, 2024 3:06pm",
    "mes": "Third try.",
    "extra": {"api": "openai", "model": "m3"},
    "swipes": ["First try.", "Second try.", "Third try.", "Fourth try."],
    "swipe_id": 2,
    "swipe_info": [
        {"send_date": "December 1, 2024 3:05pm", "gen_started": None, "gen_finished": None, "extra": {"model": f"m{i}"}}
        for i in range(1, 5)
    ],
}


def user(text: str, name: object = "Mara", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "is_user": True,
        "is_system": False,
        "send_date": "December 1, 2024 3:01pm",
        "mes": text,
    } | fields


def reply(text: str, name: str = "Keeper", **fields: Any) -> dict[str, Any]:
    return {"name": name, "is_user": False, "is_system": False, "mes": text, "extra": {}} | fields


def jsonl(*lines: dict[str, Any] | str) -> bytes:
    return b"\n".join(line.encode() if isinstance(line, str) else orjson.dumps(line) for line in lines)


FULL_CHAT = jsonl(
    HEADER,  # line 1
    GREETING,  # 2
    user("Who keeps the light?"),  # 3
    reply("I do."),  # 4
    user("Show me the logbook."),  # 5
    SWIPED_REPLY,  # 6
    user("(out of character) brb", is_system=True),  # 7
    reply("(noted)", is_system=True),  # 8
    user("Back."),  # 9
    reply("Welcome back."),  # 10
    reply("Tea?", name="Gull"),  # 11
    "{this is not json",  # 12
    user("Yes."),  # 13
    user("And bread."),  # 14
    reply("Coming up."),  # 15
)
