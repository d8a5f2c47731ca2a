"""An OpenAI-style request from a front end that keeps its own history, read against a story's path: what
the request means for the tree. Pure.

The front end sends its whole chat every time. Its messages split into the client's fixed prompt (the
system messages before the chat: card text, lore, examples), the chat (user and assistant messages; the
first assistant message before any user one is the greeting), and what follows the chat's last user or
assistant message. Read against the path root→leaf (the greeting first):

- the chat is the path plus one new user message → a new turn under the path's end (`Append`);
- the chat ends with a user message the path already holds (the front end resends the previous prompt
  unchanged: a swipe, a regenerate) → another reply under that user node (`Regenerate`);
- an earlier message differs, or is gone (an edit, a delete) → a branch from the last message that still
  matches, holding every message after it (`Append` with `branch`); the old branch stays in the tree;
- the chat ends with a reply the path holds, as the last message (a continue), or with a system message
  after it asking to continue or quoting it (a continue nudge) → that reply goes on (`Continue`); ending
  with assistant words the path does not hold (a prefill) → a new reply that starts with them (`Append`);
- system messages after the user's last words (post-history instructions, a jailbreak, lore at depth 0)
  are the client's own blocks: the turn is read as if they were not there;
- a tool round after the user's last words (the assistant's calls of the front end's own tools, and
  their results) is the turn's: read as if it were not there, and sent on as it came (`tool_round`); a
  round the chat went on after is history, as the rest of it;
- a system message after the character's words that is not a continue nudge (a summary, an impersonation
  or another "quiet" request of the front end's own extensions), or a chat with nothing to answer, is
  forwarded unchanged and not recorded (`PassThrough`, with the reason).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    text: str


@dataclass(frozen=True, slots=True)
class SplitRequest:
    """A request's messages: the client's fixed prompt, the greeting, the chat after it, and the system
    messages inside or after the chat (`blocks`: the client's own injections; `after`: what follows the chat)."""

    fixed: tuple[str, ...]
    greeting: str | None
    chat: tuple[ChatMessage, ...]
    blocks: tuple[str, ...]
    after: tuple[str, ...]
    tool_round: tuple[Mapping[str, Any], ...] = ()  # the front end's tools at work on the user's last words
    attachments: tuple[Mapping[str, Any], ...] = ()  # the parts of the user's last words that are not text


@dataclass(frozen=True, slots=True)
class Append:
    """Messages the story does not have yet, under the path's node at `parent` (an index into the path),
    oldest first, one role after the other. The last is the user's new words (a reply answers them), or
    the assistant's first words (a prefill: the reply starts with them and the upstream continues it)."""

    parent: int
    messages: tuple[ChatMessage, ...]
    branch: bool  # not under the path's end: an earlier message was edited or deleted


@dataclass(frozen=True, slots=True)
class Regenerate:
    """Another reply under the path's user node at `user`."""

    user: int


@dataclass(frozen=True, slots=True)
class Continue:
    """The reply at `reply`, as the request shows it (`text`), goes on: the upstream's words are added."""

    reply: int
    text: str


@dataclass(frozen=True, slots=True)
class PassThrough:
    reason: str


Decision = Append | Regenerate | Continue | PassThrough


def message_text(content: Any) -> str:
    """A message's `content` as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def split_request(messages: Sequence[Mapping[str, Any]], before: SplitRequest | None = None) -> SplitRequest:
    """The messages split; `before`: the split of messages that come before these (the request read on
    from there: a front end's whole history is long, and what it shares with its last request is read)."""
    fixed: list[str] = list(before.fixed) if before else []
    chat: list[ChatMessage] = list(before.chat) if before else []
    blocks: list[str] = list(before.blocks) if before else []
    after: list[str] = list(before.after) if before else []
    greeting: str | None = before.greeting if before else None
    tools: list[Mapping[str, Any]] = list(before.tool_round) if before else []
    attachments: tuple[Mapping[str, Any], ...] = before.attachments if before else ()
    for message in messages:
        role, text = message.get("role"), message_text(message.get("content"))
        if role in ("tool", "function") or (
            role == "assistant" and (message.get("tool_calls") or message.get("function_call"))
        ):
            tools.append(message)  # (as it came: the upstream gets the round of the turn it answers)
        elif role in ("system", "developer"):
            (fixed if not chat and greeting is None else after).append(text)
        elif role in ("user", "assistant"):
            tools = []  # a round the chat went on after is its history
            attachments = _attached(message.get("content")) if role == "user" else ()
            if after:  # system messages between chat messages are the client's own injections
                blocks += after
                after = []
            if role == "assistant" and not chat and greeting is None:
                greeting = text
            else:
                chat.append(ChatMessage(role, text))
    return SplitRequest(tuple(fixed), greeting, tuple(chat), tuple(blocks), tuple(after), tuple(tools), attachments)


def _attached(content: Any) -> tuple[Mapping[str, Any], ...]:
    """The parts of a message's content that are not text (images, audio: sent on, not kept)."""
    if not isinstance(content, list):
        return ()
    return tuple(p for p in content if isinstance(p, Mapping) and p.get("type") != "text")


def own_request(request: SplitRequest) -> PassThrough | None:
    """A request the front end makes for itself — nothing to answer, or a system message after the
    character's words that is not a continue nudge (a summary, an impersonation) — told from the request
    alone, whatever story it is read against; None otherwise."""
    if not request.chat:
        return PassThrough("no chat to answer")
    if request.after and request.chat[-1].role == "assistant" and not _nudges(request.after, request.chat):
        return PassThrough("a system message after the character's words: the front end's own request")
    return None


def decide(request: SplitRequest, path: Sequence[ChatMessage]) -> Decision:
    """What the request means for a path whose first message is the greeting (`path[0]`, an assistant
    message; its text may be empty when the story has none) and whose others are the story's turns,
    root→leaf."""
    own = own_request(request)
    if own is not None:
        return own
    chat = list(request.chat)
    matched = _matched(chat, path)  # path[:matched] is what the request repeats, the greeting first
    if matched == len(chat) + 1:  # the whole chat is on the path
        last = matched - 1
        return Continue(last, chat[-1].text) if chat[-1].role == "assistant" else Regenerate(last)
    parent, rest = matched - 1, chat[matched - 1 :]
    if path[parent].role == rest[0].role:  # (a deleted message: two of one role meet) joined with the one above
        rest = [ChatMessage(rest[0].role, f"{path[parent].text}\n\n{rest[0].text}"), *rest[1:]]
        parent -= 1
    if parent < 0:
        return PassThrough("the chat does not start where the story does")
    return Append(parent, _alternating(rest), branch=parent != len(path) - 1 or len(rest) > 1)


def _alternating(messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    out: list[ChatMessage] = []
    for message in messages:
        if out and out[-1].role == message.role:
            out[-1] = ChatMessage(message.role, f"{out[-1].text}\n\n{message.text}")
        else:
            out.append(message)
    return tuple(out)


def _matched(chat: Sequence[ChatMessage], path: Sequence[ChatMessage]) -> int:
    """How many messages of the path, the greeting first, the request repeats unchanged (the greeting
    always: it is the story's own, and a front end may show it otherwise)."""
    count = 1 if path else 0
    for message, node in zip(chat, path[1:], strict=False):
        if message.role != node.role or not same_words(message.text, node.text):
            break
        count += 1
    return count


_CONTINUE = re.compile(  # the nudges front ends send (SillyTavern's "[Continue your last message …]")
    r"^\W*(?:continue (?:your|the) (?:last|previous|following|current) (?:message|reply|response|sentence)"
    r"|(?:请)?(?:接着|继续)(?:写|说)?(?:你的?)?(?:上一条|刚才的?|最后一条|这条)(?:回复|消息|内容|话))",
    re.IGNORECASE,
)


def _nudges(after: Sequence[str], chat: Sequence[ChatMessage]) -> bool:
    """Whether the system messages after the character's words are a continue nudge: one of the nudges
    front ends send (opening with "Continue your last message", "继续你上一条回复"), or quoting the last
    words. An instruction that merely says "continue the story" is not one."""
    last = chat[-1].text.strip()
    return any(_CONTINUE.search(text) or (len(last) >= 20 and last[-200:] in text) for text in after)


def same_words(a: str, b: str) -> bool:
    """Whether two texts say the same: the same words, whatever the whitespace between them (a front end
    trims a reply, re-wraps it, or sends it back with its own line ends)."""
    return a.split() == b.split()


def said(role: Role, text: str) -> bytes:
    """A message's digest: its role and its words, whitespace runs taken as one (`same_words`)."""
    return hashlib.blake2b(f"{role}\x1f{' '.join(text.split())}".encode(), digest_size=16).digest()


def link(parent: bytes | None, child: bytes) -> bytes:
    """The digest of a message and the one before it (`said` of each; None: it opens a story): the key a
    chat's messages are found by in the tree, wherever the chat was cut (`Anchor`)."""
    return hashlib.blake2b((parent or b"\x00" * 16) + child, digest_size=16).digest()


def links(messages: Sequence[ChatMessage], opens: bool) -> list[bytes]:
    """The `link` of each message with the one before it; the first's with nothing when the messages
    open a story (`opens`: the chat starts with its greeting), else with an empty greeting (a chat with
    none may be the start of a story that has none; anywhere else, the first message's link finds nothing)."""
    digests = [said(m.role, m.text) for m in messages]
    before = None if opens else said("assistant", "")
    return [link(before if i == 0 else digests[i - 1], digests[i]) for i in range(len(digests))]


@dataclass(frozen=True, slots=True)
class Found:
    """A node whose message and the one before it are a chat's messages at `at` and `at - 1` (at 0: a
    story's first message, its greeting): one row of the tree's index of links."""

    node_id: str
    parent_id: str | None
    story_id: str
    at: int


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where a chat lies in a story's tree: the node of its message at `at`, and `start`, the first of
    the chat's messages that the run of repeated messages ending there holds (0: from the chat's first)."""

    node_id: str
    story_id: str
    at: int
    start: int


def anchors(found: Sequence[Found]) -> list[Anchor]:
    """The runs of a chat's messages that lie on a path of the tree one after another, each as its last
    node and where it starts (a row at `at` goes on from a row at `at - 1` that is its parent): those that
    hold the chat from its first message first, furthest into the chat first; then the others, longest
    first. Pure: the caller looks the rows up."""
    by_at: dict[int, dict[str, Anchor]] = {}
    went_on: set[tuple[int, str]] = set()
    for row in sorted(found, key=lambda r: r.at):
        below = by_at.get(row.at - 1, {}).get(row.parent_id or "")
        if below is not None:
            went_on.add((row.at - 1, below.node_id))
        start = below.start if below is not None else max(row.at - 1, 0)
        by_at.setdefault(row.at, {})[row.node_id] = Anchor(row.node_id, row.story_id, row.at, start)
    ends = [a for at, runs in by_at.items() for a in runs.values() if (at, a.node_id) not in went_on]
    return sorted(ends, key=lambda a: (a.start != 0, -a.at if a.start == 0 else a.start - a.at, -a.at))
