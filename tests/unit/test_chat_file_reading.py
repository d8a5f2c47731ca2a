"""A SillyTavern chat file read into a plan of steps: the header and the greeting's swipes, steps oldest first
with runs of one role joined, swipes that disagree with `mes`, empty texts skipped, and every `send_date` form."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from interchange.chat_plan import ChatStep
from interchange.chats import read_chat
from tests.unit.chat_files import FULL_CHAT, GREETING, HEADER, jsonl, reply, user


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
