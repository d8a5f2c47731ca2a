"""The previous-draft tools: the previous reply, read first, is revised and this one withdrawn; or nothing changes."""

from __future__ import annotations

import pytest

from domain.ports import ToolCall
from domain.tree.draft_tools import run_tool
from tests.unit.draft_turn_support import PREVIOUS, Turn


def test_previous_draft_read_returns_the_previous_text_and_its_version(turn: Turn) -> None:
    outcome = turn.run("previous_draft_read")
    assert outcome.ok
    assert outcome.content.endswith(PREVIOUS) and "v0" in outcome.content
    assert turn.reply.previous_read == {turn.previous_id: 0}


def test_previous_draft_edit_without_reading_first_is_refused(turn: Turn) -> None:
    outcome = turn.run("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]})
    assert not outcome.ok
    assert "previous_draft_read" in outcome.content
    assert (turn.previous.text, turn.previous.revisions, turn.reply.phase) == (PREVIOUS, 0, "writing")


def test_previous_draft_edit_revises_the_previous_reply_and_withdraws_this_one(turn: Turn) -> None:
    turn.run("previous_draft_read")
    outcome = turn.run("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]})
    assert outcome.ok and outcome.ends == "revised"
    assert (turn.previous.text, turn.previous.revisions) == ("风停了。灯塔的门被吹开了。", 1)
    assert turn.reply.phase == "withdrawn"


@pytest.mark.parametrize(
    ("version", "edits", "reason"),
    [
        (1, [{"old": "风很大", "new": "风停了"}], "版本冲突"),
        (0, [{"old": "雨", "new": "雪"}], "找不到"),
        (0, [{"old": PREVIOUS, "new": " "}], "清空"),
    ],
    ids=["stale-version", "missing-quote", "emptied"],
)
def test_previous_draft_edit_refusals_change_nothing(
    turn: Turn, version: int, edits: list[dict[str, str]], reason: str
) -> None:
    turn.run("previous_draft_read")
    outcome = turn.run("previous_draft_edit", {"version": version, "edits": edits})
    assert not outcome.ok
    assert reason in outcome.content
    assert (turn.previous.text, turn.previous.revisions, turn.reply.phase) == (PREVIOUS, 0, "writing")


def test_previous_draft_edit_after_the_turn_wrote_a_draft_is_refused(turn: Turn) -> None:
    turn.run("draft_write", {"version": 0, "content": "新的回复。"})
    turn.run("previous_draft_read")
    outcome = turn.run("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]})
    assert not outcome.ok
    assert (turn.previous.text, turn.reply.phase) == (PREVIOUS, "writing")


def test_previous_draft_edit_after_the_previous_reply_changed_is_refused(turn: Turn) -> None:
    turn.run("previous_draft_read")
    turn.story.annotate(turn.previous_id, "revise", "风很大。有人改过了。", "by hand")
    outcome = turn.run("previous_draft_edit", {"version": 1, "edits": [{"old": "风很大", "new": "风停了"}]})
    assert not outcome.ok
    assert "previous_draft_read" in outcome.content
    assert turn.previous.text == "风很大。有人改过了。"


def test_previous_draft_tools_without_a_previous_reply_are_refused(turn: Turn) -> None:
    outcome = run_tool(turn.reply, None, ToolCall("c", "previous_draft_read", "{}"))
    assert not outcome.ok
    assert turn.reply.previous_read == {}
