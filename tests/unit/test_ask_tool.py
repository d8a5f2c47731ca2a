"""The `ask` tool: two to four options pause the turn until the user answers, once."""

from __future__ import annotations

from typing import Any

import pytest

from domain.errors import TurnStateError
from tests.builders import TENANT
from tests.unit.draft_turn_support import Turn


@pytest.mark.parametrize("options", [["灯塔"], ["甲", "乙", "丙", "丁", "戊"], ["甲", ""], ["甲", 2], "甲乙"])
def test_ask_with_other_than_two_to_four_options_is_refused(turn: Turn, options: Any) -> None:
    outcome = turn.run("ask", {"question": "去哪？", "options": options})
    assert not outcome.ok and outcome.ends is None
    assert "2–4" in outcome.content
    assert (turn.reply.phase, turn.reply.ask) == ("writing", None)


def test_ask_with_an_empty_question_is_refused(turn: Turn) -> None:
    outcome = turn.run("ask", {"question": " ", "options": ["甲", "乙"]})
    assert not outcome.ok
    assert turn.reply.phase == "writing"


@pytest.mark.parametrize("count", [2, 4])
def test_ask_with_two_to_four_options_pauses_the_turn(turn: Turn, count: int) -> None:
    options = ["灯塔", "码头", "渔村", "山顶"][:count]
    outcome = turn.run("ask", {"question": "去哪？", "options": options}, call_id="call_ask")
    assert outcome.ok and outcome.ends == "asked"
    reply = turn.reply
    assert reply.phase == "waiting"
    assert reply.ask is not None
    assert (reply.ask.ask_id, reply.ask.question, reply.ask.options) == ("call_ask", "去哪？", options)


def test_answer_resumes_writing_and_answering_twice_is_refused(turn: Turn) -> None:
    turn.run("ask", {"question": "去哪？", "options": ["灯塔", "码头"]})
    answered = turn.app.turns.answer_ask(TENANT, turn.reply_id, "灯塔")
    ask, view = answered.ask, answered.reply
    assert ask.question == "去哪？"
    assert view.phase == "writing"
    with pytest.raises(TurnStateError):
        turn.app.turns.answer_ask(TENANT, turn.reply_id, "码头")
