"""Chat files that cannot be read: a wrong type names its line and field, a file without messages or past a
limit is a ChatFormatError, and arbitrary bytes or JSON lines read to a consistent plan or are refused."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interchange.chat_plan import ChatFormatError, ChatImportPlan, ChatLimits
from interchange.chats import read_chat
from tests.unit.chat_files import FULL_CHAT, GREETING, HEADER, jsonl, reply, user


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
