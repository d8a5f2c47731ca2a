"""The draft tools on a reply being written: versioned writes, reading and searching, sealing, bad calls refused."""

from __future__ import annotations

from typing import Any

import pytest

from domain.tree.draft_tools import ToolOutcome
from domain.tree.turn_events import DraftEdited, DraftRead, DraftRefused, DraftSearched
from tests.unit.draft_turn_support import Turn, kinds

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
