"""A reply being written after a previous one (`Turn`), for the tests of the main model's tools."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from domain.application import Changji
from domain.ports import ChatResult, ToolCall
from domain.tree.draft_tools import ToolOutcome, run_tool
from domain.tree.node import Node
from tests.builders import StoryBuilder

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


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]
