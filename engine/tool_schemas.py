"""The tool definitions the main model sees (OpenAI function schemas) and the rules that explain them.
What each call does to the draft is `domain/tree/draft_tools.py`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.language import Language

MAX_ROUNDS = 20

_RULES_ZH = """# 写作方式（稿纸）
本拍的回复写在稿纸上，只能通过工具修改：
- draft_write 写入整篇，draft_append 续写，draft_edit 按原文片段替换（一批修改针对同一版本），draft_read / draft_search 查看；
- 每次写入都要带上你读到的版本号 version（新稿纸从 0 开始），版本不符会被拒绝，需要重新读取；
- 写完后调用 draft_seal 收笔，本拍结束；
- 需要用户拍板时调用 ask（2–4 个具体选项），等待作答后继续；
- 只需修订上一条回复时，先 previous_draft_read，再 previous_draft_edit，本拍不产生新回复；
- 需要早前剧情里的细节（人名、约定、发生过的事）而上文没有时，调用 memory_search 检索故事记忆；
- 【设定】只列出条目标题，需要正文时调用 lorebook_search；剧情新确立的人物、地点、事物用 lorebook_write 记入补充设定集。
不调用工具直接输出的正文会被收入稿纸并自动收笔。"""

_RULES_EN = """# How to write (the draft)
This beat's reply is written on a draft that only the tools change:
- draft_write writes it whole, draft_append continues it, draft_edit replaces quoted passages (one batch against one version), draft_read / draft_search look at it;
- every write carries the version you read (a new draft starts at 0); a stale version is refused and you read again;
- when it is done, call draft_seal: the beat ends;
- when the user must decide, call ask (2–4 concrete options) and go on once they answer;
- to revise only the previous reply, call previous_draft_read, then previous_draft_edit: the beat makes no new reply;
- when you need a detail of the earlier story (a name, a promise, something that happened) that is not above, call memory_search;
- [Lore] lists entries by title only: call lorebook_search for their text; record a person, place or thing the story newly established with lorebook_write.
Text you write without calling a tool goes into the draft and is sealed."""

ENGINE_RULES: Mapping[Language, str] = {"zh": _RULES_ZH, "en": _RULES_EN}
"""The draft rules appended to the system prompt, in the story's language. The tool schemas below stay
in English whatever the story's language: they are the functions' interface, as every provider's are."""


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_VERSION = {"type": "integer", "description": "the draft version you read (0 for a new draft)"}
_EDITS = {
    "type": "array",
    "description": "quote→replacement pairs, all against the same version; each quote must occur exactly once",
    "items": {
        "type": "object",
        "properties": {"old": {"type": "string"}, "new": {"type": "string"}},
        "required": ["old", "new"],
    },
}

TOOLS: list[dict[str, Any]] = [
    _function(
        "draft_write",
        "Write or replace the whole draft.",
        {"version": _VERSION, "content": {"type": "string"}},
        ["version", "content"],
    ),
    _function(
        "draft_append",
        "Append to the draft (separated by a blank line unless `separator` says otherwise).",
        {"version": _VERSION, "content": {"type": "string"}, "separator": {"type": "string"}},
        ["version", "content"],
    ),
    _function(
        "draft_edit",
        "Replace quoted passages of the draft.",
        {"version": _VERSION, "edits": _EDITS},
        ["version", "edits"],
    ),
    _function(
        "draft_read",
        "Read the draft (or characters start..end of it).",
        {"start": {"type": "integer"}, "end": {"type": "integer"}},
        [],
    ),
    _function(
        "draft_search",
        "Find a phrase in the draft.",
        {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
        ["query"],
    ),
    _function(
        "lorebook_search",
        "Look up the world's lore (the card's lorebooks): people, places, things, rules. The context names the "
        "entries that came up this turn by title; this gives their text.",
        {
            "query": {"type": "string", "description": "a name or a few words"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "description": "how many entries (default 3)"},
        },
        ["query"],
    ),
    _function(
        "lorebook_write",
        "Record a new person, place or thing the story established, in the card's supplementary lorebook, so "
        "later turns and stories know it. Write what the story made true, not plans.",
        {
            "title": {"type": "string", "description": "the entry's name"},
            "keys": {"type": "array", "items": {"type": "string"}, "description": "words that bring it up"},
            "content": {"type": "string", "description": "what is true about it, in a few sentences"},
        },
        ["title", "keys", "content"],
    ),
    _function(
        "memory_search",
        "Search the story's memory (every earlier turn on this path, and episode summaries) for passages "
        "about something: a name, a promise, an event. Answers with the best passages, in story order.",
        {
            "query": {"type": "string", "description": "what to look for, in words the story would use"},
            "k": {"type": "integer", "minimum": 1, "maximum": 10, "description": "how many passages (default 5)"},
        },
        ["query"],
    ),
    _function(
        "draft_seal", "Seal the draft: the reply is final and the turn ends.", {"version": _VERSION}, ["version"]
    ),
    _function(
        "ask",
        "Pause and let the user choose how the story goes on.",
        {
            "question": {"type": "string"},
            "options": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
        },
        ["question", "options"],
    ),
    _function("previous_draft_read", "Read the previous reply of the story (before revising it).", {}, []),
    _function(
        "previous_draft_edit",
        "Revise the previous reply in place; the turn ends without a new reply.",
        {"version": _VERSION, "edits": _EDITS},
        ["version", "edits"],
    ),
]
