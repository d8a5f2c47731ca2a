"""The main model's tools on a reply being written, and one model round recorded by `play_round`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import pytest

from domain.application import Changji
from domain.errors import TurnStateError
from domain.ports import ChatResult, ToolCall
from domain.tree.draft_tools import ToolOutcome, run_tool
from domain.tree.node import Node
from domain.tree.turn_events import (
    DraftAppended,
    DraftEdited,
    DraftRead,
    DraftRefused,
    DraftSearched,
    DraftWritten,
    MemorySearched,
    ModelCalled,
    TurnStopped,
)
from domain.values import Recollection
from tests.builders import TENANT, StoryBuilder

PREVIOUS = "风很大。灯塔的门被吹开了。"


@dataclass
class Turn:
    app: Changji
    story: StoryBuilder
    previous_id: UUID
    reply_id: UUID

    @property
    def reply(self) -> Node:
        node = self.app.repository.get(self.reply_id)
        assert isinstance(node, Node)
        return node

    @property
    def previous(self) -> Node:
        node = self.app.repository.get(self.previous_id)
        assert isinstance(node, Node)
        return node

    def run(self, name: str, arguments: Any = None, call_id: str = "call_1") -> ToolOutcome:
        """Run one tool call on the reply and save what it did (as `play_round` would)."""
        reply, previous = self.reply, self.previous
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)
        outcome = run_tool(reply, previous, ToolCall(call_id, name, raw))
        self.app.save(reply, previous)
        return outcome

    def events(self, since: int = 0) -> list[Any]:
        return self.app.events_of(self.reply_id)[since:]

    def new_events(self, call: Any) -> list[Any]:
        before = len(self.events())
        call()
        return self.events(before)

    def round(self, text: str = "", *calls: tuple[str, Any], tools_allowed: bool = True) -> Any:
        tool_calls = tuple(
            ToolCall(f"call_{i}", name, args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
            for i, (name, args) in enumerate(calls)
        )
        result = ChatResult(text, tool_calls, "fake-main", 120, 30, "tool_calls" if calls else "stop")
        return self.app.turns.play_round(self.reply_id, result, 12.5, tools_allowed)


@pytest.fixture
def turn(app: Changji, story: StoryBuilder) -> Turn:
    _, previous = story.turn("灯塔怎么了？", PREVIOUS)
    reply = app.turns.open_turn(TENANT, story.story_id, uuid4(), uuid4(), "再说一遍。", None, "fake-main").reply
    return Turn(app, story, previous, reply.id)


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


# --- versioned writes -------------------------------------------------------------------------


def test_draft_write_creates_version_one(turn: Turn) -> None:
    outcome = turn.run("draft_write", {"version": 0, "content": "雾散了。"})
    assert outcome.ok and outcome.ends is None
    assert (turn.reply.text, turn.reply.draft_version) == ("雾散了。", 1)
    assert "v1" in outcome.content


def test_draft_append_separates_with_a_blank_line_by_default(turn: Turn) -> None:
    turn.run("draft_write", {"version": 0, "content": "第一段。"})
    turn.run("draft_append", {"version": 1, "content": "第二段。"})
    turn.run("draft_append", {"version": 2, "content": "尾。", "separator": ""})
    assert (turn.reply.text, turn.reply.draft_version) == ("第一段。\n\n第二段。尾。", 3)


def test_draft_append_to_an_empty_draft_has_no_separator(turn: Turn) -> None:
    turn.run("draft_append", {"version": 0, "content": "开头。"})
    assert turn.reply.text == "开头。"


def test_draft_edit_applies_a_batch_as_one_new_version(turn: Turn) -> None:
    turn.run("draft_write", {"version": 0, "content": "雾散了。灯亮了。"})
    outcome = turn.run("draft_edit", {"version": 1, "edits": [{"old": "雾", "new": "云"}, {"old": "亮", "new": "灭"}]})
    assert outcome.ok
    assert (turn.reply.text, turn.reply.draft_version) == ("云散了。灯灭了。", 2)
    (edited,) = [e for e in turn.events() if isinstance(e, DraftEdited)]
    assert edited.version == 2 and len(edited.edits) == 2


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("draft_write", {"version": 0, "content": "覆盖。"}),
        ("draft_append", {"version": 0, "content": "续。"}),
        ("draft_edit", {"version": 0, "edits": [{"old": "雾", "new": "云"}]}),
        ("draft_seal", {"version": 0}),
    ],
    ids=["write", "append", "edit", "seal"],
)
def test_stale_version_is_refused_with_a_draft_refused_event_and_no_change(
    turn: Turn, name: str, arguments: dict[str, Any]
) -> None:
    turn.run("draft_write", {"version": 0, "content": "雾散了。"})
    outcome: list[ToolOutcome] = []
    new = turn.new_events(lambda: outcome.append(turn.run(name, arguments)))
    assert not outcome[0].ok
    assert "版本冲突" in outcome[0].content  # the model is told in the story's language
    assert kinds(new) == ["DraftRefused"] and "version conflict" in new[0].reason  # the event keeps it in English
    assert new[0].tool == name
    assert (turn.reply.text, turn.reply.draft_version, turn.reply.phase) == ("雾散了。", 1, "writing")


@pytest.mark.parametrize(
    "edits",
    [
        [{"old": "雾", "new": "云"}, {"old": "不存在", "new": "x"}],
        [{"old": "了", "new": "啦"}],
        [{"old": "雾散", "new": "a"}, {"old": "散了", "new": "b"}],
        [],
        "雾→云",
    ],
    ids=["missing", "repeated", "overlapping", "empty", "not-a-list"],
)
def test_bad_edit_batch_is_refused_whole(turn: Turn, edits: Any) -> None:
    turn.run("draft_write", {"version": 0, "content": "雾散了。灯亮了。"})
    outcome = turn.run("draft_edit", {"version": 1, "edits": edits})
    new_events = [e for e in turn.events() if isinstance(e, DraftEdited | DraftRefused)]
    assert not outcome.ok
    assert kinds(new_events) == ["DraftRefused"]
    assert (turn.reply.text, turn.reply.draft_version) == ("雾散了。灯亮了。", 1)


# --- malformed and unknown calls ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "reason", "told"),
    [
        ('{"version": 0, "content": ', "not valid JSON", "不是有效的 JSON"),
        ("[0, 1]", "JSON object", "JSON 对象"),
        ('{"version": "0", "content": "x"}', "`version` must be an integer", "`version` 必须是整数"),
        ('{"version": true, "content": "x"}', "`version` must be an integer", "`version` 必须是整数"),
        ('{"version": 0}', "`content` must be a string", "`content` 必须是字符串"),
        ('{"version": 0, "content": 5}', "`content` must be a string", "`content` 必须是字符串"),
    ],
    ids=["truncated-json", "array", "version-string", "version-bool", "no-content", "content-number"],
)
def test_malformed_arguments_are_refused_not_raised(turn: Turn, arguments: str, reason: str, told: str) -> None:
    outcome = turn.run("draft_write", arguments)
    assert not outcome.ok
    assert told in outcome.content
    assert outcome.content.startswith("未执行")
    refusals = [e for e in turn.events() if isinstance(e, DraftRefused)]
    assert [(r.tool, reason in r.reason) for r in refusals] == [("draft_write", True)]
    assert (turn.reply.text, turn.reply.draft_version, turn.reply.phase) == ("", 0, "writing")


def test_empty_arguments_are_read_as_an_empty_object(turn: Turn) -> None:
    turn.run("draft_write", {"version": 0, "content": "雾。"})
    assert turn.run("draft_read", "").ok


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("draft_read", {"start": None, "end": None}, "雾散了。"),
        ("draft_append", {"version": 1, "content": "续。", "separator": None}, "已续写"),
        ("draft_search", {"query": "雾", "limit": None}, "命中 1 处"),
    ],
    ids=["read-range", "append-separator", "search-limit"],
)
def test_optional_arguments_sent_as_null_take_their_defaults(
    turn: Turn, name: str, arguments: dict[str, Any], expected: str
) -> None:
    # models in strict function-calling mode send every optional parameter, as null when unused
    turn.run("draft_write", {"version": 0, "content": "雾散了。"})
    outcome = turn.run(name, arguments)
    assert outcome.ok, outcome.content
    assert expected in outcome.content


def test_unknown_tool_is_refused(turn: Turn) -> None:
    outcome = turn.run("draft_delete", {"version": 0})
    assert not outcome.ok and outcome.ends is None
    assert "draft_delete" in outcome.content
    (refused,) = [e for e in turn.events() if isinstance(e, DraftRefused)]
    assert refused.tool == "draft_delete"


# --- reading and searching ---------------------------------------------------------------------


def test_draft_read_returns_the_text_and_version_and_leaves_a_read_event(turn: Turn) -> None:
    turn.run("draft_write", {"version": 0, "content": "雾散了。灯亮了。"})
    whole = turn.run("draft_read", {})
    part = turn.run("draft_read", {"start": 4, "end": 8})
    assert "v1" in whole.content and whole.content.endswith("雾散了。灯亮了。")
    assert part.content.endswith("\n灯亮了。")
    reads = [e for e in turn.events() if isinstance(e, DraftRead)]
    assert [(r.version, r.start, r.end) for r in reads] == [(1, None, None), (1, 4, 8)]
    assert turn.reply.draft_version == 1


def test_draft_search_reports_hits_and_clamps_the_limit(turn: Turn) -> None:
    turn.run("draft_write", {"version": 0, "content": "灯。" * 60})
    outcome = turn.run("draft_search", {"query": "灯", "limit": 500})
    missing = turn.run("draft_search", {"query": "船"})
    searched = [e for e in turn.events() if isinstance(e, DraftSearched)]
    assert "命中 50 处" in outcome.content
    assert "命中 0 处" in missing.content
    assert [s.hits for s in searched] == [50, 0]


# --- seal ---------------------------------------------------------------------------------------


def test_draft_seal_ends_the_turn_and_blocks_later_writes(turn: Turn) -> None:
    turn.run("draft_write", {"version": 0, "content": "雾散了。"})
    sealed = turn.run("draft_seal", {"version": 1})
    later = turn.run("draft_write", {"version": 1, "content": "改。"})
    assert sealed.ok and sealed.ends == "sealed"
    assert not later.ok
    assert (turn.reply.phase, turn.reply.text) == ("sealed", "雾散了。")


@pytest.mark.parametrize("content", ["", "  \n "], ids=["empty", "blank"])
def test_seal_of_an_empty_draft_is_refused(turn: Turn, content: str) -> None:
    if content:
        turn.run("draft_write", {"version": 0, "content": content})
    version = turn.reply.draft_version
    outcome = turn.run("draft_seal", {"version": version})
    assert not outcome.ok and outcome.ends is None
    assert turn.reply.phase == "writing"
    assert [e.tool for e in turn.events() if isinstance(e, DraftRefused)] == ["draft_seal"]


# --- ask -------------------------------------------------------------------------------------------


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


# --- previous_draft_read / previous_draft_edit ---------------------------------------------------


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


# --- play_round: one recorded model round ------------------------------------------------------------


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


def test_memory_search_answers_what_the_engine_found_and_records_it_word_for_word(turn: Turn) -> None:
    found = [Recollection(turn.previous_id, "turn", "- 第1轮 User：灯塔怎么了？ 沈砚：风很大。")]
    reply, previous = turn.reply, turn.previous
    call = ToolCall("call_1", "memory_search", json.dumps({"query": "灯塔"}, ensure_ascii=False))
    outcome = run_tool(reply, previous, call, {"call_1": found})
    turn.app.save(reply, previous)
    assert outcome.ok and "风很大" in outcome.content
    [searched] = [e for e in turn.events() if isinstance(e, MemorySearched)]
    assert searched.query == "灯塔"
    assert searched.found == [{"node_id": str(turn.previous_id), "kind": "turn", "line": found[0].line}]


@pytest.mark.parametrize(
    ("memory", "refusal", "told"),
    [(None, "cannot be searched", "无法检索"), ({"call_1": None}, "failed", "检索失败"), ({"call_1": []}, None, None)],
)
def test_memory_search_without_memory_or_after_a_failed_search_is_refused(
    turn: Turn, memory: dict[str, Any] | None, refusal: str | None, told: str | None
) -> None:
    reply = turn.reply
    outcome = run_tool(reply, None, ToolCall("call_1", "memory_search", '{"query": "灯塔"}'), memory)
    if refusal is None:  # a search that found nothing says so, and is recorded
        assert outcome.ok and "没有找到" in outcome.content
        assert kinds(list(reply.collect_events())) == ["MemorySearched"]
    else:
        assert not outcome.ok and told is not None and told in outcome.content  # the story's language
        events = list(reply.collect_events())
        assert kinds(events) == ["DraftRefused"] and refusal in events[0].reason  # the event's, as an error's


# --- refusals in the story's language --------------------------------------------------------

# (setup calls, then the refused one): every way a tool call is refused that the model can meet
REFUSALS: dict[str, tuple[list[tuple[str, Any]], tuple[str, Any]]] = {
    "not-json": ([], ("draft_write", '{"version": 0, "content": ')),
    "not-an-object": ([], ("draft_write", "[0]")),
    "version-not-an-integer": ([], ("draft_write", {"version": "0", "content": "雾。"})),
    "content-not-a-string": ([], ("draft_write", {"version": 0, "content": 5})),
    "stale-version": ([("draft_write", {"version": 0, "content": "雾。"})], ("draft_append", {"version": 0, "content": "灯。"})),
    "edits-not-a-list": ([("draft_write", {"version": 0, "content": "雾。"})], ("draft_edit", {"version": 1, "edits": "x"})),
    "edit-malformed": ([("draft_write", {"version": 0, "content": "雾。"})], ("draft_edit", {"version": 1, "edits": [{"old": 1}]})),
    "edit-quotes-nothing": ([("draft_write", {"version": 0, "content": "雾。"})], ("draft_edit", {"version": 1, "edits": [{"old": "", "new": "云"}]})),
    "quote-missing": ([("draft_write", {"version": 0, "content": "雾。"})], ("draft_edit", {"version": 1, "edits": [{"old": "雨", "new": "云"}]})),
    "quote-repeated": ([("draft_write", {"version": 0, "content": "雾，雾。"})], ("draft_edit", {"version": 1, "edits": [{"old": "雾", "new": "云"}]})),
    "edits-overlap": ([("draft_write", {"version": 0, "content": "雾散了。"})], ("draft_edit", {"version": 1, "edits": [{"old": "雾散", "new": "云"}, {"old": "散了", "new": "开"}]})),
    "seal-empty": ([], ("draft_seal", {"version": 0})),
    "sealed": ([("draft_write", {"version": 0, "content": "雾。"}), ("draft_seal", {"version": 1})], ("draft_write", {"version": 1, "content": "灯。"})),
    "question-empty": ([], ("ask", {"question": " ", "options": ["甲", "乙"]})),
    "options-bad": ([], ("ask", {"question": "去哪？", "options": ["甲"]})),
    "previous-unread": ([], ("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]})),
    "previous-stale": ([("previous_draft_read", {})], ("previous_draft_edit", {"version": 3, "edits": [{"old": "风很大", "new": "风停了"}]})),
    "previous-emptied": ([("previous_draft_read", {})], ("previous_draft_edit", {"version": 0, "edits": [{"old": PREVIOUS, "new": " "}]})),
    "revision-after-writing": ([("draft_write", {"version": 0, "content": "雾。"}), ("previous_draft_read", {})], ("previous_draft_edit", {"version": 0, "edits": [{"old": "风很大", "new": "风停了"}]})),
    "memory-k": ([], ("memory_search", {"query": "灯塔", "k": 99})),
    "memory-unavailable": ([], ("memory_search", {"query": "灯塔"})),
    "lore-arguments": ([], ("lorebook_search", {"query": ""})),
    "lore-unavailable": ([], ("lorebook_search", {"query": "灯塔"})),
    "no-such-tool": ([], ("draft_burn", {})),
}  # fmt: skip


def _words(text: str) -> list[str]:
    """English words of a refusal outside `quoted names`, tool names and quoted story text."""
    bare = re.sub(r"`[^`]*`|“[^”]*”|'[^']*'|\{[^}]*\}|previous_draft_\w+|v\d+|JSON", " ", text)
    return re.findall(r"[A-Za-z]{3,}", bare)


@pytest.mark.parametrize("language", ["zh", "en"])
@pytest.mark.parametrize("case", list(REFUSALS))
def test_the_model_is_told_why_in_the_story_language(turn: Turn, case: str, language: str) -> None:
    setup, (name, arguments) = REFUSALS[case]
    for step in setup:
        assert turn.run(*step).ok, step
    reply, previous = turn.reply, turn.previous
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    outcome = run_tool(reply, previous, ToolCall("call_9", name, raw), language=language)  # type: ignore[arg-type]
    assert not outcome.ok
    refusal = [e for e in reply.collect_events() if isinstance(e, DraftRefused)]
    assert len(refusal) == 1 and _words(refusal[0].reason), refusal  # the event keeps it in English
    if language == "zh":
        head, _, reason = outcome.content.partition("：")
        assert head == "未执行" and any("\u4e00" <= c <= "\u9fff" for c in reason), outcome.content
        assert _words(reason) == [] and reason != refusal[0].reason, outcome.content
    else:
        assert outcome.content.startswith("Not done: ") and outcome.content[len("Not done: ") :] == refusal[0].reason


@pytest.mark.parametrize(
    "arguments",
    [
        {"title": "", "content": "灯塔守夜人姓陈。", "keys": ["灯塔"]},
        {"title": "守夜人", "content": "", "keys": ["灯塔"]},
        {"title": "守夜人", "content": "灯塔守夜人姓陈。", "keys": []},
        {"title": "守夜人", "content": "灯塔守夜人姓陈。", "keys": ["灯塔", " "]},
        "not json",
    ],
    ids=["no-title", "no-content", "no-keys", "empty-key", "not-json"],
)
def test_a_refused_lore_write_is_told_in_the_story_language_too(turn: Turn, arguments: Any) -> None:
    played = turn.round("", ("lorebook_write", arguments))
    (outcome,) = played.outcomes
    head, _, reason = outcome.content.partition("：")
    assert not outcome.ok and head == "未执行" and _words(reason) == [], outcome.content
    refusal = [e for e in turn.events() if isinstance(e, DraftRefused)]
    assert [r.tool for r in refusal] == ["lorebook_write"] and _words(refusal[0].reason)
