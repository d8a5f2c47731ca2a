"""The main model's tools: what each call does to the reply's draft, and what the model is told back.

Pure decisions on aggregates already loaded; `application.play_round` loads, calls and saves. Every
call leaves an event: the operation itself, or `DraftRefused` with the reason in English (the model
is told it in the story's language: `DomainError.told`).
`memory_search` reads the story's memory, which the engine searched before the round was played
(`memory_request` says what to search); the passages it was shown are recorded (`MemorySearched`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from domain.errors import DomainError, DraftEditError, EmptyTextError
from domain.language import Language
from domain.ports import ToolCall
from domain.tree.node import Node
from domain.tree.rules.drafting import APPEND_SEPARATOR, apply_edits, parse_edits
from domain.values import Recollection

Ending = Literal["sealed", "asked", "revised"]
MAX_SEARCH_HITS = 50
MEMORY_K, MAX_MEMORY_K, MAX_MEMORY_QUERY = 5, 10, 500
LORE_K, MAX_LORE_K = 3, 10
MAX_LORE_KEYS, MAX_LORE_TITLE, MAX_LORE_CONTENT = 20, 200, 4000
LoreFound = tuple[str, str]  # an entry the lore search found: its title and content


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    call_id: str
    name: str
    content: str
    ok: bool
    ends: Ending | None = None


class _BadArguments(DomainError):
    """The tool's arguments are missing, mistyped or not JSON."""


ToolTexts = Mapping[str, str]
TOOL_TEXTS: Mapping[Language, ToolTexts] = {
    "zh": {
        "refused": "未执行：{reason}",
        "written": "已写入稿纸，当前版本 v{version}（{chars} 字）。",
        "appended": "已续写，当前版本 v{version}（{chars} 字）。",
        "edited": "已修改，当前版本 v{version}。",
        "read": "当前版本 v{version}，共 {chars} 字：\n{text}",
        "hits": "版本 v{version}，命中 {count} 处。",
        "hit": "- 位置 {at}：…{passage}…",
        "sealed": "已收笔（v{version}）。本拍结束。",
        "asked": "已向用户提问，等待作答。",
        "previous": "上一条回复（版本 v{version}，{chars} 字）：\n{text}",
        "revised": "已修订上一条回复（v{version}）。本拍结束，不产生新回复。",
        "memory_none": "记忆中没有找到与「{query}」有关的早前片段。",
        "memory_found": "记忆中与「{query}」有关的早前片段（{count} 条，按剧情先后）：\n{lines}",
        "answered": "用户已作答：「{answer}」。",
        "draft_now": "当前稿件（v{version}）：\n{text}",
        "empty": "稿纸还是空的（v0）。",
        "lore_none": "设定集里没有与「{query}」有关的条目。",
        "lore_found": "设定集中与「{query}」有关的条目（{count} 条）：\n{lines}",
        "lore_line": "【{title}】{content}",
        "lore_written": "已记入补充设定集：「{title}」。",
        "lore_held": "「{title}」已记下，等待用户确认后生效。",
        "lore_known": "补充设定集里已有相同内容的条目「{title}」，未重复记录。",
    },
    "en": {
        "refused": "Not done: {reason}",
        "written": "Written to the draft, now at v{version} ({chars} characters).",
        "appended": "Continued, now at v{version} ({chars} characters).",
        "edited": "Edited, now at v{version}.",
        "read": "Version v{version}, {chars} characters:\n{text}",
        "hits": "Version v{version}, {count} match(es).",
        "hit": "- at {at}: …{passage}…",
        "sealed": "Sealed (v{version}). The beat is over.",
        "asked": "The question is with the user; waiting for the answer.",
        "previous": "The previous reply (version v{version}, {chars} characters):\n{text}",
        "revised": "The previous reply is revised (v{version}). The beat is over, with no new reply.",
        "memory_none": "Nothing in the story's memory about “{query}”.",
        "memory_found": "Earlier passages about “{query}” ({count}, in story order):\n{lines}",
        "answered": "The user answered: “{answer}”. ",
        "draft_now": "The draft as it stands (v{version}):\n{text}",
        "empty": "The draft is still empty (v0).",
        "lore_none": "Nothing in the lorebooks about “{query}”.",
        "lore_found": "Lorebook entries about “{query}” ({count}):\n{lines}",
        "lore_line": "[{title}] {content}",
        "lore_written": "Recorded in the supplementary lorebook: “{title}”.",
        "lore_held": "“{title}” is noted; it takes effect once the user approves it.",
        "lore_known": "The supplementary lorebook already has an entry with that content, “{title}”: not recorded twice.",
    },
}
"""What a tool call answers the main model, in the story's language."""


def _args(call: ToolCall) -> dict[str, Any]:
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        raise _BadArguments(
            "arguments are not valid JSON; send one JSON object", zh="参数不是有效的 JSON；请发送一个 JSON 对象"
        ) from None
    if not isinstance(args, dict):
        raise _BadArguments("arguments must be a JSON object", zh="参数必须是一个 JSON 对象")
    return args


def _int(args: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = default if args.get(name) is None else args[name]  # strict-mode models send null for "unset"
    if isinstance(value, bool) or not isinstance(value, int):
        raise _BadArguments(f"`{name}` must be an integer", zh=f"`{name}` 必须是整数")
    return value


def _optional_int(args: Mapping[str, Any], name: str) -> int | None:
    return None if args.get(name) is None else _int(args, name)


def _str(args: Mapping[str, Any], name: str, default: str | None = None) -> str:
    value = default if args.get(name) is None else args[name]
    if not isinstance(value, str):
        raise _BadArguments(f"`{name}` must be a string", zh=f"`{name}` 必须是字符串")
    return value


def lore_request(call: ToolCall) -> tuple[str, int] | None:
    """What a `lorebook_search` call asks for, (query, limit); None when its arguments are not usable."""
    try:
        args = _args(call)
        query, limit = _str(args, "query").strip(), _int(args, "limit", LORE_K)
    except DomainError:
        return None
    return (query, limit) if query and len(query) <= MAX_MEMORY_QUERY and 1 <= limit <= MAX_LORE_K else None


def lore_write_request(call: ToolCall) -> dict[str, Any]:
    """A `lorebook_write` call's entry fields (title, keys, content); refused when unusable. The model's
    entries are never constant: a constant entry goes into the system prompt, which stays byte-stable."""
    args = _args(call)
    title, content = _str(args, "title").strip(), _str(args, "content").strip()
    keys = args.get("keys")
    if not title or len(title) > MAX_LORE_TITLE:
        raise _BadArguments(
            f"`title` must be 1–{MAX_LORE_TITLE} characters", zh=f"`title` 须为 1–{MAX_LORE_TITLE} 个字符"
        )
    if not content or len(content) > MAX_LORE_CONTENT:
        raise _BadArguments(
            f"`content` must be 1–{MAX_LORE_CONTENT} characters", zh=f"`content` 须为 1–{MAX_LORE_CONTENT} 个字符"
        )
    if not isinstance(keys, list) or not 1 <= len(keys) <= MAX_LORE_KEYS:
        raise _BadArguments(
            f"`keys` must be a list of 1–{MAX_LORE_KEYS} words", zh=f"`keys` 须为 1–{MAX_LORE_KEYS} 个关键词的列表"
        )
    if not all(isinstance(k, str) and k.strip() for k in keys):
        raise _BadArguments("every key must be a non-empty string", zh="每个关键词都必须是非空字符串")
    return {"title": title, "content": content, "keys": tuple(k.strip() for k in keys)}


def memory_request(call: ToolCall) -> tuple[str, int] | None:
    """What a `memory_search` call asks for, (query, k); None when its arguments are not usable (the
    round then refuses it)."""
    try:
        return _memory_args(_args(call))
    except DomainError:
        return None


def _memory_args(args: Mapping[str, Any]) -> tuple[str, int]:
    query, k = _str(args, "query").strip(), _int(args, "k", MEMORY_K)
    if not query or len(query) > MAX_MEMORY_QUERY:
        raise _BadArguments(
            f"`query` must be 1–{MAX_MEMORY_QUERY} characters", zh=f"`query` 须为 1–{MAX_MEMORY_QUERY} 个字符"
        )
    if not 1 <= k <= MAX_MEMORY_K:
        raise _BadArguments(f"`k` must be 1–{MAX_MEMORY_K}", zh=f"`k` 须在 1–{MAX_MEMORY_K} 之间")
    return query, k


def run_tool(
    reply: Node,
    previous: Node | None,
    call: ToolCall,
    memory: Mapping[str, Sequence[Recollection] | None] | None = None,
    language: Language = "zh",
    lore: Mapping[str, Sequence[LoreFound] | None] | None = None,
) -> ToolOutcome:
    """Run one tool call against the reply being written (and the previous reply, for revisions).
    `memory`: what the engine found for each `memory_search` call, by call id (None: the search failed;
    absent: the story's memory is not searched here). Answers in the story's `language`."""
    handler, texts = _TOOLS.get(call.name), TOOL_TEXTS[language]
    try:
        if call.name == "memory_search":
            content, ends = _memory_search(reply, _args(call), memory or {}, call.id, texts), None
        elif call.name == "lorebook_search":
            content, ends = _lore_search(call, lore or {}, texts), None
        elif handler is None:
            raise _BadArguments(f"there is no tool named {call.name!r}", zh=f"没有名为 {call.name!r} 的工具")
        else:
            content, ends = handler(reply, previous, _args(call), call.id, texts)
    except DomainError as refusal:
        reply.refuse(call.name, str(refusal))  # (the event keeps the reason in English, as any error's)
        return ToolOutcome(call.id, call.name, texts["refused"].format(reason=refusal.told(language)), ok=False)
    return ToolOutcome(call.id, call.name, content, ok=True, ends=ends)


Result = tuple[str, Ending | None]


def _write(reply: Node, _: Node | None, args: Mapping[str, Any], call_id: str, texts: ToolTexts) -> Result:
    version = reply.write_draft(_int(args, "version"), _str(args, "content"))
    return texts["written"].format(version=version, chars=len(reply.text)), None


def _append(reply: Node, _: Node | None, args: Mapping[str, Any], call_id: str, texts: ToolTexts) -> Result:
    version = reply.append_draft(
        _int(args, "version"), _str(args, "content"), _str(args, "separator", APPEND_SEPARATOR)
    )
    return texts["appended"].format(version=version, chars=len(reply.text)), None


def _edit(reply: Node, _: Node | None, args: Mapping[str, Any], call_id: str, texts: ToolTexts) -> Result:
    version = reply.edit_draft(_int(args, "version"), parse_edits(args.get("edits")))
    return texts["edited"].format(version=version), None


def _read(reply: Node, _: Node | None, args: Mapping[str, Any], call_id: str, texts: ToolTexts) -> Result:
    text = reply.read_draft(_optional_int(args, "start"), _optional_int(args, "end"))
    return texts["read"].format(version=reply.draft_version, chars=len(reply.text), text=text), None


def _search(reply: Node, _: Node | None, args: Mapping[str, Any], call_id: str, texts: ToolTexts) -> Result:
    limit = max(1, min(_int(args, "limit", 8), MAX_SEARCH_HITS))
    hits = reply.search_draft(_str(args, "query"), limit)
    lines = [texts["hit"].format(at=at, passage=passage) for at, passage in hits]
    head = texts["hits"].format(version=reply.draft_version, count=len(hits))
    return head + ("\n" + "\n".join(lines) if lines else ""), None


def _seal(reply: Node, _: Node | None, args: Mapping[str, Any], call_id: str, texts: ToolTexts) -> Result:
    reply.seal(_int(args, "version"))
    return texts["sealed"].format(version=reply.draft_version), "sealed"


def _ask(reply: Node, _: Node | None, args: Mapping[str, Any], call_id: str, texts: ToolTexts) -> Result:
    question, options = _str(args, "question"), args.get("options")
    if not question.strip():
        raise _BadArguments("`question` must not be empty", zh="`question` 不能为空")
    if (
        not isinstance(options, list)
        or not 2 <= len(options) <= 4
        or not all(isinstance(o, str) and o.strip() for o in options)
    ):
        raise _BadArguments("`options` must be 2–4 non-empty strings", zh="`options` 须为 2–4 个非空字符串")
    reply.ask_user(call_id, question, options)
    return texts["asked"], "asked"


def _previous_read(
    reply: Node, previous: Node | None, args: Mapping[str, Any], call_id: str, texts: ToolTexts
) -> Result:
    if previous is None:
        raise _BadArguments("there is no earlier reply on this path to read", zh="这条路径上没有更早的回复可读")
    reply.note_previous_read(previous.id, previous.revisions)
    return texts["previous"].format(version=previous.revisions, chars=len(previous.text), text=previous.text), None


def _previous_edit(
    reply: Node, previous: Node | None, args: Mapping[str, Any], call_id: str, texts: ToolTexts
) -> Result:
    if previous is None:
        raise _BadArguments("there is no earlier reply on this path to revise", zh="这条路径上没有更早的回复可修订")
    version = _int(args, "version")
    if reply.previous_read.get(previous.id) != previous.revisions:
        raise DraftEditError(
            "call previous_draft_read first (the reply may have changed since)",
            zh="请先调用 previous_draft_read（那条回复可能已经改过）",
        )
    if version != previous.revisions:
        raise DraftEditError(
            f"version conflict: the previous reply is at v{previous.revisions}, not v{version}",
            zh=f"版本冲突：上一条回复在 v{previous.revisions}，不是 v{version}",
        )
    text = apply_edits(previous.text, parse_edits(args.get("edits")))
    if not text.strip():
        raise EmptyTextError("a revision cannot empty the reply", zh="修订不能把回复清空")
    reply.withdraw(previous.id, "revised the previous reply")
    previous.revise(text, "previous_draft_edit")
    return texts["revised"].format(version=previous.revisions), "revised"


class _MemoryUnavailable(DomainError):
    """The story's memory could not be searched for this call."""


def _memory_search(
    reply: Node,
    args: Mapping[str, Any],
    memory: Mapping[str, Sequence[Recollection] | None],
    call_id: str,
    texts: ToolTexts,
) -> str:
    query, _ = _memory_args(args)
    if call_id not in memory:
        raise _MemoryUnavailable("the story's memory cannot be searched here", zh="这里无法检索剧情记忆")
    found = memory[call_id]
    if found is None:
        raise _MemoryUnavailable(
            "the memory search failed; go on without it, or try again", zh="记忆检索失败；可以不用它接着写，或再试一次"
        )
    reply.note_memory_search(query, [{"node_id": str(r.node_id), "kind": r.kind, "line": r.line} for r in found])
    if not found:
        return texts["memory_none"].format(query=query)
    lines = "\n".join(r.line for r in found)
    return texts["memory_found"].format(query=query, count=len(found), lines=lines)


def _lore_search(call: ToolCall, lore: Mapping[str, Sequence[LoreFound] | None], texts: ToolTexts) -> str:
    asked = lore_request(call)
    if asked is None:
        raise _BadArguments(
            f"`query` must be 1–{MAX_MEMORY_QUERY} characters and `limit` 1–{MAX_LORE_K}",
            zh=f"`query` 须为 1–{MAX_MEMORY_QUERY} 个字符，`limit` 须在 1–{MAX_LORE_K} 之间",
        )
    found = lore.get(call.id)
    if found is None:
        raise _MemoryUnavailable("the lorebook cannot be searched here", zh="这里无法检索设定集")
    if not found:
        return texts["lore_none"].format(query=asked[0])
    lines = "\n".join(texts["lore_line"].format(title=title, content=content) for title, content in found)
    return texts["lore_found"].format(query=asked[0], count=len(found), lines=lines)


def lore_written(title: str, new: bool, pending: bool, language: Language) -> str:
    """What `lorebook_write` answers: recorded, held for approval, or already there."""
    texts = TOOL_TEXTS[language]
    return texts["lore_known" if not new else "lore_held" if pending else "lore_written"].format(title=title)


def refused(reason: str, language: Language) -> str:
    return TOOL_TEXTS[language]["refused"].format(reason=reason)


_TOOLS = {
    "draft_write": _write,
    "draft_append": _append,
    "draft_edit": _edit,
    "draft_read": _read,
    "draft_search": _search,
    "draft_seal": _seal,
    "ask": _ask,
    "previous_draft_read": _previous_read,
    "previous_draft_edit": _previous_edit,
}
