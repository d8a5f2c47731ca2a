"""One model round recorded by `play_round`: text and tool calls into the draft, how the turn ends, its usage."""

from __future__ import annotations

import pytest

from domain.errors import TurnStateError
from domain.tree.turn_events import DraftAppended, DraftRead, DraftWritten, ModelCalled, TurnStopped
from tests.unit.draft_turn_support import Turn


def test_round_without_tool_calls_captures_the_text_as_a_direct_write_and_seals(turn: Turn) -> None:
    played = turn.round("直接写出的回复。")
    assert played.ends == "sealed"
    assert (played.reply.text, played.reply.phase, played.reply.draft_version) == ("直接写出的回复。", "sealed", 1)
    (written,) = [e for e in turn.events() if isinstance(e, DraftWritten)]
    assert written.direct is True


def test_round_without_tool_calls_appends_trailing_text_to_an_unsealed_draft(turn: Turn) -> None:
    turn.round("", ("draft_write", {"version": 0, "content": "第一段。"}))
    played = turn.round("第二段。")
    assert played.ends == "sealed"
    assert played.reply.text == "第一段。\n\n第二段。"
    (appended,) = [e for e in turn.events() if isinstance(e, DraftAppended)]
    assert appended.direct is True


def test_round_with_neither_text_nor_tools_stops_the_turn(turn: Turn) -> None:
    played = turn.round("   ")
    assert played.ends == "stopped"
    assert played.reply.phase == "stopped"


def test_round_records_the_model_call_with_its_usage(turn: Turn) -> None:
    turn.round("好。")
    (called,) = [e for e in turn.events() if isinstance(e, ModelCalled)]
    assert (called.purpose, called.model, called.prompt_tokens, called.completion_tokens, called.outcome) == (
        "turn",
        "fake-main",
        120,
        30,
        "ok",
    )


def test_round_after_the_limit_with_tool_calls_stops_the_turn_as_runaway(turn: Turn) -> None:
    played = turn.round("想再看看。", ("draft_read", {}), tools_allowed=False)
    assert played.ends == "stopped"
    assert (played.reply.phase, played.reply.text) == ("stopped", "想再看看。")
    (stopped,) = [e for e in turn.events() if isinstance(e, TurnStopped)]
    assert stopped.reason == "runaway"
    assert not any(isinstance(e, DraftRead) for e in turn.events())


def test_round_stops_running_tools_after_the_one_that_ends_the_turn(turn: Turn) -> None:
    played = turn.round(
        "",
        ("draft_write", {"version": 0, "content": "雾。"}),
        ("draft_seal", {"version": 1}),
        ("draft_write", {"version": 1, "content": "不该写入。"}),
    )
    assert played.ends == "sealed"
    assert [o.name for o in played.outcomes] == ["draft_write", "draft_seal"]
    assert played.reply.text == "雾。"


def test_round_keeps_text_streamed_before_an_ask_in_the_draft(turn: Turn) -> None:
    played = turn.round("他停在门口。", ("ask", {"question": "进不进去？", "options": ["进", "不进"]}))
    assert played.ends == "asked"
    assert played.ask == ("call_0", "进不进去？", ["进", "不进"])
    assert (played.reply.text, played.reply.phase) == ("他停在门口。", "waiting")


def test_round_on_a_reply_that_is_not_writing_is_refused(turn: Turn) -> None:
    turn.round("好。")
    with pytest.raises(TurnStateError):
        turn.round("又一句。")


def test_revision_round_moves_the_leaf_back_to_the_previous_reply(turn: Turn) -> None:
    turn.round("", ("previous_draft_read", {}))
    played = turn.round("", ("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]}))
    assert played.ends == "revised"
    assert played.reply.phase == "withdrawn"
    assert turn.story.leaf == turn.previous_id
    assert turn.app.node(turn.previous_id).text.startswith("风停了")


def test_fail_turn_keeps_the_streamed_preview_as_an_unsealed_draft(turn: Turn) -> None:
    view = turn.app.turns.fail_turn(turn.reply_id, "error", "timeout: slow", "半句话", ("timeout", 300.0)).value
    assert (view.phase, view.text, view.draft_version) == ("stopped", "半句话", 1)
    called = [e for e in turn.events() if isinstance(e, ModelCalled)]
    assert [(c.outcome, c.prompt_tokens) for c in called] == [("timeout", 0)]
