"""A story's messages written as a SillyTavern chat: the header first, SillyTavern's fields and date form,
swipes with their swipe_info; the file reads back to the same chat, and inconsistent swipes are refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from interchange.chat_export import ChatExportMessage, write_chat
from interchange.chat_plan import ChatStep
from interchange.chats import read_chat

AT = datetime(2024, 12, 1, 15, 4, 37, tzinfo=UTC)
EXPORT = [
    ChatExportMessage(
        "greeting", "The lamp is lit.", AT, "ignored", False, ("The door creaks.", "The lamp is lit."), 1
    ),
    ChatExportMessage("user", "Who keeps the light?", datetime(2024, 12, 1, 15, 5), "Mara", False),
    ChatExportMessage("reply", "I do.", AT, "Keeper", False, ("I did.", "I do.", "We do."), 1, {"model": "m1"}),
    ChatExportMessage("user", "(brb)", AT, "Mara", True),
    ChatExportMessage("reply", "(noted)", AT, "Keeper", True),
    ChatExportMessage("user", "Back.", datetime(2024, 12, 1, 23, 59, tzinfo=UTC), "Mara", False),
    ChatExportMessage("reply", "Welcome back.", datetime(2025, 1, 1, 0, 1, tzinfo=UTC), "Keeper", False),
]


def exported() -> bytes:
    return write_chat(
        EXPORT, user_name="Mara", character_name="Keeper", created_at=AT, chat_metadata={"tainted": False}
    )


def exported_lines() -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in exported().split(b"\n")]


def test_written_file_starts_with_the_header_and_has_no_trailing_newline() -> None:
    raw = exported()
    assert not raw.endswith(b"\n")
    assert orjson.loads(raw.split(b"\n")[0]) == {
        "user_name": "Mara",
        "character_name": "Keeper",
        "create_date": "2024-12-01@15h04m37s",
        "chat_metadata": {"tainted": False},
    }


def test_written_messages_use_sillytavern_fields_and_its_date_form() -> None:
    greeting, first_user = exported_lines()[1:3]
    assert greeting["name"] == "Keeper"
    assert (greeting["is_user"], greeting["is_system"], greeting["send_date"]) == (
        False,
        False,
        "December 1, 2024 3:04pm",
    )
    assert first_user == {
        "name": "Mara",
        "is_user": True,
        "is_system": False,
        "send_date": "December 1, 2024 3:05pm",
        "mes": "Who keeps the light?",
        "extra": {},
    }


def test_written_swipes_show_mes_and_carry_one_swipe_info_each() -> None:
    swiped = exported_lines()[3]
    assert swiped["mes"] == swiped["swipes"][swiped["swipe_id"]] == "I do."
    assert [info["extra"] for info in swiped["swipe_info"]] == [{}, {"model": "m1"}, {}]
    assert {info["send_date"] for info in swiped["swipe_info"]} == {"December 1, 2024 3:04pm"}


def test_round_trip_keeps_texts_roles_swipes_hidden_flags_and_minutes() -> None:
    plan = read_chat(exported())
    assert ([g.text for g in plan.greetings], plan.greeting_index) == (["The door creaks.", "The lamp is lit."], 1)
    assert plan.greetings[1].sent_at == AT.replace(second=0)
    assert [exported_view(step) for step in plan.steps] == [source_view(message) for message in EXPORT[1:]]
    assert (plan.user_name, plan.character_name, plan.header["chat_metadata"], plan.warnings) == (
        "Mara",
        "Keeper",
        {"tainted": False},
        (),
    )


def exported_view(step: ChatStep) -> tuple[object, ...]:
    swipes = tuple(
        t.text for t in (*step.alternatives[: step.chosen_index], step.chosen, *step.alternatives[step.chosen_index :])
    )
    return (
        step.role,
        step.chosen.text,
        step.name,
        step.hidden,
        swipes if len(swipes) > 1 else (),
        step.chosen_index,
        step.chosen.sent_at,
    )


def source_view(message: ChatExportMessage) -> tuple[object, ...]:
    sent_at = message.sent_at.replace(second=0, tzinfo=message.sent_at.tzinfo or UTC)
    return message.role, message.text, message.name, message.hidden, message.swipes, message.swipe_id, sent_at


@pytest.mark.parametrize(
    "message",
    [
        ChatExportMessage("reply", "X", AT, "K", False, ("A", "B"), 1),
        ChatExportMessage("reply", "B", AT, "K", False, ("A", "B"), 2),
        ChatExportMessage("reply", "B", AT, "K", False, (), 1),
        ChatExportMessage("user", "A", AT, "M", False, ("A", "B"), 0),
    ],
)
def test_inconsistent_swipes_are_refused_when_writing(message: ChatExportMessage) -> None:
    with pytest.raises(ValueError, match="swipe"):
        write_chat([message], user_name="M", character_name="K", created_at=AT)


def test_a_greeting_after_the_first_message_is_refused_when_writing() -> None:
    with pytest.raises(ValueError, match="greeting"):
        write_chat([EXPORT[1], EXPORT[0]], user_name="M", character_name="K", created_at=AT)
