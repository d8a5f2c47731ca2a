"""A SillyTavern chat made into a story's steps: runs of one role joined once, each node within the API's
text limit, the import's record bounded, and files that would make too many nodes refused."""

from __future__ import annotations

import orjson
import pytest

from domain.values import CardData
from interchange.chat_plan import ChatFormatError, ChatLimits
from interchange.chats import read_chat
from service.chat_transfer import NOTED, imported_chat


def chat(*messages: dict[str, object], junk: int = 0) -> bytes:
    header = {"user_name": "Mara", "character_name": "Keeper", "create_date": "2024-12-01@15h04m00s"}
    lines = [orjson.dumps(header), *(orjson.dumps(m) for m in messages), *([b"not json"] * junk)]
    return b"\n".join(lines)


def says(text: str, user: bool, **more: object) -> dict[str, object]:
    return {"name": "Mara" if user else "Keeper", "is_user": user, "mes": text, "send_date": "", **more}


CARD = CardData(name="Keeper", first_mes="The lamp is lit.")


def test_a_run_of_replies_is_joined_into_one_node_and_a_hidden_one_among_them_is_kept_apart() -> None:
    plan = read_chat(chat(says("The lamp is lit.", False), says("Hello?", True), says("One.", False),
                          says("Two.", False, is_system=True), says("Three.", False, swipes=["Three.", "Four."])))  # fmt: skip
    imported = imported_chat(plan, CARD, "")
    steps = imported.steps
    assert [s.kind for s in steps] == ["user", "reply"]
    assert [s.text for s in steps[1].swipes] == ["One.\n\nThree.", "One.\n\nFour."]
    assert not steps[1].hidden and imported.source["unplaced"] == ["Two."]


def test_joining_that_would_pass_the_text_limit_is_refused() -> None:
    replies = [says("x" * 4_000, False, is_system=i % 2 == 1) for i in range(60)]  # 120k shown in one run
    plan = read_chat(chat(says("The lamp is lit.", False), says("Hello?", True), *replies))
    with pytest.raises(ChatFormatError, match="over 100000 characters"):
        imported_chat(plan, CARD, "")


def test_a_file_that_would_make_too_many_nodes_is_refused() -> None:
    swiped = [says("Hello?", True), says("A.", False, swipes=[f"A{i}." for i in range(100)])] * 6
    with pytest.raises(ChatFormatError, match="messages and swipes"):
        read_chat(chat(says("The lamp is lit.", False), *swiped), ChatLimits(max_nodes=500))


def test_a_file_of_mostly_junk_lines_is_not_a_chat_and_the_record_keeps_only_the_first_lines() -> None:
    with pytest.raises(ChatFormatError, match="not a chat file"):
        read_chat(chat(says("Hi.", True), junk=11), ChatLimits(max_skipped=10))
    plan = read_chat(chat(says("The lamp is lit.", False), says("Hello?", True), junk=NOTED * 3))
    source = imported_chat(plan, CARD, "").source
    assert len(source["skipped_lines"]) == NOTED and source["skipped_count"] == NOTED * 3


def test_a_messages_own_text_among_its_swipes_is_not_counted_against_the_node_limit() -> None:
    rows = [says("Hello?", True, swipes=["Hello?"]), says("Hi.", False, swipes=["Hi."])] * 100
    plan = read_chat(chat(says("The lamp is lit.", False), *rows), ChatLimits(max_nodes=201))
    assert len(plan.steps) == 200
