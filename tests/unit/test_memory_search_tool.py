"""The `memory_search` tool: the engine's findings answered and recorded word for word; no memory is a refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest

from domain.ports import ToolCall
from domain.tree.draft_tools import run_tool
from domain.tree.turn_events import MemorySearched
from domain.values import Recollection
from tests.unit.draft_turn_support import Turn, kinds


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
