"""SillyTavern chat files: read into a plan of steps, written back, and read again unchanged."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interchange.chat_export import ChatExportMessage, write_chat
from interchange.chat_plan import ChatFormatError, ChatImportPlan, ChatLimits, ChatStep
from interchange.chats import read_chat

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


def steps_of(raw: bytes) -> tuple[ChatStep, ...]:
    return read_chat(raw).steps


def texts(step: ChatStep) -> list[str]:
    return [alternative.text for alternative in step.alternatives]


def test_header_is_kept_verbatim_and_names_come_from_it() -> None:
    plan = read_chat(FULL_CHAT)
    assert (plan.header, plan.user_name, plan.character_name) == (HEADER, "Mara", "Keeper")


def test_greeting_swipes_are_the_alternatives_in_swipe_order() -> None:
    plan = read_chat(FULL_CHAT)
    assert [greeting.text for greeting in plan.greetings] == GREETING["swipes"]
    assert plan.greeting_index == 1
    assert plan.greetings[1].sent_at == datetime(2024, 12, 1, 15, 0, tzinfo=UTC)


def test_steps_follow_the_chat_oldest_first() -> None:
    steps = steps_of(FULL_CHAT)
    assert [(step.role, step.chosen.text, step.hidden) for step in steps] == [
        ("user", "Who keeps the light?", False),
        ("reply", "I do.", False),
        ("user", "Show me the logbook.", False),
        ("reply", "Third try.", False),
        ("user", "(out of character) brb", True),
        ("reply", "(noted)", True),
        ("user", "Back.", False),
        ("reply", "Welcome back.\n\nGull: Tea?", False),
        ("user", "Yes.\n\nAnd bread.", False),
        ("reply", "Coming up.", False),
    ]


def test_swiped_reply_keeps_its_other_swipes_and_their_swipe_info() -> None:
    step = steps_of(FULL_CHAT)[3]
    assert (step.chosen_index, texts(step)) == (2, ["First try.", "Second try.", "Fourth try."])
    assert step.chosen.extra == {"api": "openai", "model": "m3"}
    assert step.chosen.sent_at == datetime(2024, 12, 1, 15, 6, tzinfo=UTC)
    assert [alternative.extra for alternative in step.alternatives] == [
        {"model": "m1"},
        {"model": "m2"},
        {"model": "m4"},
    ]
    assert step.alternatives[0].sent_at == datetime(2024, 12, 1, 15, 5, tzinfo=UTC)


def test_consecutive_messages_of_one_role_are_joined_into_one_step() -> None:
    joined = [(step.joined, step.source_lines, step.name) for step in steps_of(FULL_CHAT)][7:9]
    assert joined == [(2, (10, 11), "Keeper"), (2, (13, 14), "Mara")]


def test_unparseable_lines_are_skipped_and_listed() -> None:
    assert read_chat(FULL_CHAT).skipped_lines == (12,)


def test_a_clean_chat_has_no_warnings() -> None:
    assert read_chat(FULL_CHAT).warnings == ()


def test_joined_alternatives_come_from_the_last_message_after_the_earlier_parts() -> None:
    raw = jsonl(HEADER, GREETING, user("Hi."), reply("Hello."), reply("B", name="Gull", swipes=["A", "B"], swipe_id=1))
    step = steps_of(raw)[1]
    assert (step.chosen.text, texts(step), step.chosen_index) == ("Hello.\n\nGull: B", ["Hello.\n\nGull: A"], 1)


def test_hidden_and_visible_messages_of_one_role_are_not_joined() -> None:
    raw = jsonl(HEADER, GREETING, user("Hi."), reply("Shown."), reply("Hidden.", is_system=True))
    assert [(step.chosen.text, step.hidden) for step in steps_of(raw)[1:]] == [("Shown.", False), ("Hidden.", True)]


def test_joined_hidden_messages_stay_hidden() -> None:
    raw = jsonl(HEADER, GREETING, user("a", is_system=True), user("b", is_system=True))
    assert [(step.chosen.text, step.hidden, step.joined) for step in steps_of(raw)] == [("a\n\nb", True, 2)]


def test_headerless_group_chat_takes_names_from_its_messages() -> None:
    raw = jsonl(
        reply("Welcome aboard.", name="Ada"),
        user("Thanks.", name="Sam"),
        reply("Hm.", name="Ada"),
        reply("Ho.", name="Bo"),
    )
    plan = read_chat(raw)
    assert (plan.header, plan.user_name, plan.character_name) == ({}, "Sam", "Ada")
    assert [greeting.text for greeting in plan.greetings] == ["Welcome aboard."]
    assert [step.chosen.text for step in plan.steps] == ["Thanks.", "Hm.\n\nBo: Ho."]


def test_chat_opening_with_the_user_has_no_greeting() -> None:
    plan = read_chat(jsonl(HEADER, user("Knock knock."), reply("Who's there?")))
    assert (plan.greetings, plan.greeting_index, [s.role for s in plan.steps]) == ((), 0, ["user", "reply"])


def test_hidden_first_message_is_a_hidden_step_not_a_greeting() -> None:
    plan = read_chat(jsonl(HEADER, reply("Note.", is_system=True, extra={"type": "narrator"}), user("Hi.")))
    assert plan.greetings == ()
    assert [(step.role, step.hidden) for step in plan.steps] == [("reply", True), ("user", False)]


def test_missing_names_fall_back_to_the_header() -> None:
    raw = jsonl(HEADER, GREETING, {"is_user": True, "mes": "Hi."}, {"mes": "Hello."})
    assert [step.name for step in steps_of(raw)] == ["Mara", "Keeper"]


def test_crlf_lines_and_a_byte_order_mark_are_read() -> None:
    raw = b"\xef\xbb\xbf" + jsonl(HEADER, GREETING, user("Hi.")).replace(b"\n", b"\r\n")
    plan = read_chat(raw)
    assert (plan.header, len(plan.steps), plan.skipped_lines) == (HEADER, 1, ())


def test_non_object_json_lines_are_skipped() -> None:
    plan = read_chat(jsonl(HEADER, "[1, 2]", GREETING, '"text"', user("Hi."), "", "  "))
    assert plan.skipped_lines == (2, 4)


# Swipes that disagree with mes


def test_mes_outside_the_swipes_is_chosen_after_them() -> None:
    plan = read_chat(jsonl(HEADER, GREETING, user("Hi."), reply("Edited.", swipes=["A", "B"], swipe_id=1)))
    step = plan.steps[1]
    assert (step.chosen.text, texts(step), step.chosen_index) == ("Edited.", ["A", "B"], 2)
    assert any("line 4" in warning for warning in plan.warnings)


def test_out_of_range_swipe_id_chooses_the_swipe_equal_to_mes() -> None:
    plan = read_chat(jsonl(HEADER, GREETING, user("Hi."), reply("B", swipes=["A", "B", "C"], swipe_id=7)))
    step = plan.steps[1]
    assert (step.chosen.text, texts(step), step.chosen_index) == ("B", ["A", "C"], 1)
    assert plan.warnings


def test_a_user_message_swipes_are_ignored_with_a_warning() -> None:
    plan = read_chat(jsonl(HEADER, GREETING, user("Hi.", swipes=["Hi.", "Hey."], swipe_id=0)))
    assert (plan.steps[0].alternatives, len(plan.warnings)) == ((), 1)


def test_malformed_swipe_info_is_ignored_with_a_warning() -> None:
    plan = read_chat(jsonl(HEADER, GREETING, user("Hi."), reply("B", swipes=["A", "B"], swipe_id=1, swipe_info="x")))
    assert (plan.steps[1].alternatives[0].sent_at, len(plan.warnings)) == (None, 1)


# Empty texts


def test_an_empty_reply_without_swipes_is_skipped_with_a_warning() -> None:
    plan = read_chat(jsonl(HEADER, GREETING, user("Hi."), reply(""), user("Hello?"), reply("Sorry.")))
    assert [step.chosen.text for step in plan.steps] == ["Hi.\n\nHello?", "Sorry."]
    assert plan.warnings == ("line 4: an empty message is skipped",)


def test_an_empty_user_message_is_skipped_with_a_warning() -> None:
    plan = read_chat(jsonl(HEADER, GREETING, user("  "), user("Hi.")))
    assert ([step.chosen.text for step in plan.steps], len(plan.warnings)) == (["Hi."], 1)


def test_an_empty_shown_reply_takes_its_first_non_empty_swipe() -> None:
    step = steps_of(jsonl(HEADER, GREETING, user("Hi."), reply("", swipes=["A", "", "B"], swipe_id=1)))[1]
    assert (step.chosen.text, texts(step), step.chosen_index) == ("A", ["B"], 0)


def test_empty_swipes_are_dropped_and_the_chosen_index_follows() -> None:
    step = steps_of(jsonl(HEADER, GREETING, user("Hi."), reply("B", swipes=["", "A", "", "B"], swipe_id=3)))[1]
    assert (step.chosen.text, texts(step), step.chosen_index) == ("B", ["A"], 1)


# Dates


@pytest.mark.parametrize(
    ("send_date", "expected"),
    [
        ("December 1, 2024 3:04pm", datetime(2024, 12, 1, 15, 4, tzinfo=UTC)),
        ("Dec 1, 2024 3:04 PM", datetime(2024, 12, 1, 15, 4, tzinfo=UTC)),
        ("June 19, 2023 12:20am", datetime(2023, 6, 19, 0, 20, tzinfo=UTC)),
        ("June 19, 2023 12:20pm", datetime(2023, 6, 19, 12, 20, tzinfo=UTC)),
        ("2024-12-01 15:04:00", datetime(2024, 12, 1, 15, 4, tzinfo=UTC)),
        ("2024-12-01T15:04:00.250Z", datetime(2024, 12, 1, 15, 4, 0, 250_000, tzinfo=UTC)),
        ("2024-12-01T17:04:00+02:00", datetime(2024, 12, 1, 15, 4, tzinfo=UTC)),
        ("2024-12-1 5:04", datetime(2024, 12, 1, 5, 4, tzinfo=UTC)),
        ("2024-12-01@15h04m00s", datetime(2024, 12, 1, 15, 4, tzinfo=UTC)),
        ("2024-12-1 @15h 04m 09s 120ms", datetime(2024, 12, 1, 15, 4, 9, 120_000, tzinfo=UTC)),
        (1733065440000, datetime(2024, 12, 1, 15, 4, tzinfo=UTC)),
        ("1733065440000", datetime(2024, 12, 1, 15, 4, tzinfo=UTC)),
        ("yesterday", None),
        ("Smarch 1, 2024 3:04pm", None),
        ("December 1, 2024 13:04pm", None),
        ("2024-02-30 10:00", None),
        (1e30, None),
        (True, None),
        ({"at": 1}, None),
        (None, None),
    ],
)
def test_send_date_forms_parse_to_utc_or_none(send_date: object, expected: datetime | None) -> None:
    plan = read_chat(jsonl(HEADER, reply("Hello.", send_date=send_date)))
    assert plan.greetings[0].sent_at == expected


# Errors and limits


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"name": "Mara", "is_user": True, "mes": 5}, "line 3.mes"),
        ({"name": "Mara", "is_user": True, "mes": None}, "line 3.mes"),
        ({"name": "Mara", "is_user": True}, "line 3.mes"),
        (user("Hi.", is_user="yes"), "line 3.is_user"),
        (user("Hi.", is_user=1), "line 3.is_user"),
        (user("Hi.", is_system=0), "line 3.is_system"),
        (user("Hi.", name=7), "line 3.name"),
        (reply("B", swipes="B"), "line 3.swipes"),
        (reply("B", swipes=["A", 2]), "line 3.swipes[1]"),
        (reply("B", swipes=["A", "B"], swipe_id="1"), "line 3.swipe_id"),
        (reply("B", swipes=["A", "B"], swipe_id=True), "line 3.swipe_id"),
        (reply("B", extra=[]), "line 3.extra"),
    ],
)
def test_a_wrong_type_is_an_error_naming_the_line_and_field(line: dict[str, Any], field: str) -> None:
    with pytest.raises(ChatFormatError) as error:
        read_chat(jsonl(HEADER, GREETING, line))
    assert error.value.field == field


@pytest.mark.parametrize(("key", "value"), [("user_name", 5), ("character_name", []), ("chat_metadata", "x")])
def test_a_wrong_header_type_is_an_error_on_line_one(key: str, value: object) -> None:
    with pytest.raises(ChatFormatError) as error:
        read_chat(jsonl(HEADER | {key: value}, GREETING))
    assert error.value.field == f"line 1.{key}"


@pytest.mark.parametrize("raw", [b"", b"\n\n", jsonl(HEADER), jsonl(HEADER, "garbage", "[]"), jsonl(HEADER, reply(""))])
def test_a_file_without_messages_is_an_error(raw: bytes) -> None:
    with pytest.raises(ChatFormatError, match="no messages"):
        read_chat(raw)


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        (ChatLimits(max_bytes=100), "file"),
        (ChatLimits(max_messages=3), "file"),
        (ChatLimits(max_swipes=3), "line 6.swipes"),
        (ChatLimits(max_text=16), "line 3.mes"),
        (ChatLimits(max_text=24), "line 10"),
    ],
)
def test_limits_are_errors(limits: ChatLimits, field: str) -> None:
    with pytest.raises(ChatFormatError) as error:
        read_chat(FULL_CHAT, limits)
    assert error.value.field == field


def test_ten_thousand_messages_are_read() -> None:
    lines = [
        user(f"Question {i}.") if i % 2 == 0 else reply(f"Answer {i}.", swipes=[f"Answer {i}."]) for i in range(10_000)
    ]
    plan = read_chat(jsonl(HEADER, *lines))
    assert (len(plan.steps), plan.steps[-1].chosen.text, plan.warnings) == (10_000, "Answer 9999.", ())


# Writing and the round trip

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


# Arbitrary input

json_text = st.text(st.characters(codec="utf-8"), max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(json_text, children, max_size=4),
    max_leaves=12,
)
message_keys = st.sampled_from(
    [
        "mes",
        "is_user",
        "is_system",
        "name",
        "send_date",
        "extra",
        "swipes",
        "swipe_id",
        "swipe_info",
        "user_name",
        "chat_metadata",
    ]
)
message_like = st.dictionaries(message_keys, json_values | st.lists(json_text, max_size=4), max_size=9)
json_lines = st.lists(message_like | json_values, max_size=12).map(
    lambda rows: b"\n".join(orjson.dumps(row) for row in rows)
)


def read_or_refuse(raw: bytes) -> ChatImportPlan | None:
    try:
        return read_chat(raw)
    except ChatFormatError:
        return None


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_are_read_or_refused_with_a_chat_format_error(raw: bytes) -> None:
    read_or_refuse(raw)


@settings(max_examples=200, deadline=None)
@given(json_lines)
def test_arbitrary_json_lines_give_a_consistent_plan_or_a_chat_format_error(raw: bytes) -> None:
    plan = read_or_refuse(raw)
    if plan is not None:
        assert plan.greetings or plan.steps
        assert all(step.chosen.text.strip() and 0 <= step.chosen_index <= len(step.alternatives) for step in plan.steps)
