"""Every refusal of a tool call reaches the model in the story's language, while its event keeps it in English."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from domain.ports import ToolCall
from domain.tree.draft_tools import run_tool
from domain.tree.turn_events import DraftRefused
from tests.unit.draft_turn_support import PREVIOUS, Turn

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
