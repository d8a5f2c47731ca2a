"""SillyTavern chat files (`.jsonl`) read without I/O: `read_chat` turns the bytes of a chat file into a
`ChatImportPlan` (`chat_plan`) of the path to build. One message line is read by `chat_messages`, its dates by
`chat_dates`; chats are written by `chat_export`.

Reading decisions, where the format is silent:

* Lines are split on "\\n" (a trailing "\\r" and a leading UTF-8 byte-order mark are tolerated). Blank lines are
  ignored silently; a line that is not a JSON object is skipped and listed in `skipped_lines`, as SillyTavern's
  loader skips it.
* The first JSON object is the header when it has neither `mes` nor `is_user` and has `user_name`,
  `character_name` or `chat_metadata`; otherwise the file has no header (a group chat) and `header` is {}.
  A header's `user_name` and `character_name` must be strings and its `chat_metadata` an object.
* `user_name` / `character_name` come from the header, else from the first user message / the greeting or first
  reply, else "". A message without `name` is named after them.
* Every other object is a message. The greeting is the first message when it is neither the user's nor hidden; its
  swipes are the greeting alternatives (`[first_mes, ...alternate_greetings]`) in swipe order and
  `greeting_index` is the chosen one. A chat that opens otherwise has no greeting (empty tuple, index 0). The
  greeting is never joined: a reply right after it becomes a reply step of its own, so the builder may meet a
  reply with no user message before it.
* A hidden message stays, as a hidden step of its role.
* Consecutive messages of one role and one visibility form a run, joined into one step (a hidden message is never
  joined with a visible one, so a joined step is hidden exactly when all its messages are). Texts are joined with
  a blank line; a part whose speaker differs from the first speaker is prefixed "Name: " (for user runs too: a
  persona may change mid-chat). The step is named after the first speaker. Only the last message of a run can
  have been swiped meaningfully (SillyTavern swipes only the last message), so the alternatives come from the
  last message, each preceded by the earlier parts, and the chosen text's `sent_at` and `extra` are the last
  message's. Steps therefore alternate user/reply except where a hidden run meets a visible run of one role.
* A skipped empty message may let its neighbours join. A file with no greeting and no step left raises
  `ChatFormatError("no messages")`.
* Limits (`ChatLimits`): the file's bytes, the message count, the swipes of one message and the characters of one
  text (a source text or a joined one) each raise `ChatFormatError` when exceeded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from interchange.chat_messages import SourceMessage, check_length, is_object, is_str, read_message, typed_field
from interchange.chat_plan import ChatFormatError, ChatImportPlan, ChatLimits, ChatStep, ChatTurnText, Role

_BOM = b"\xef\xbb\xbf"
_HEADER_KEYS = ("user_name", "character_name", "chat_metadata")
_MESSAGE_KEYS = ("mes", "is_user")


@dataclass(frozen=True, slots=True)
class _Names:
    user: str
    character: str

    def of(self, message: SourceMessage) -> str:
        if message.name is not None:
            return message.name
        return self.user if message.role == "user" else self.character


def read_chat(raw: bytes, limits: ChatLimits = ChatLimits()) -> ChatImportPlan:
    """The plan of the path a chat file holds: its header, greeting, steps, warnings and skipped lines."""
    if len(raw) > limits.max_bytes:
        raise ChatFormatError(f"the file is larger than {limits.max_bytes} bytes")
    objects, skipped = _json_objects(raw)
    if len(skipped) > limits.max_skipped:
        raise ChatFormatError(f"more than {limits.max_skipped} lines are not JSON objects: this is not a chat file")
    header, header_line = _split_header(objects)
    rows = objects[1:] if header_line else objects
    if len(rows) > limits.max_messages:
        raise ChatFormatError(f"more than {limits.max_messages} messages")
    others = sum(max(len(row["swipes"]) - 1, 0) for _, row in rows if isinstance(row.get("swipes"), list))
    if len(rows) + others > limits.max_nodes:  # (a message's swipes hold its own text too)
        raise ChatFormatError(f"more than {limits.max_nodes} messages and swipes together")
    warnings: list[str] = []
    messages = [read_message(line, row, limits, warnings) for line, row in rows]
    greeting = _greeting(messages)
    kept = [message for message in messages[1 if greeting else 0 :] if message is not None]
    if greeting is None and not kept:
        raise ChatFormatError("no messages")
    names = _names(header, greeting, kept)
    return ChatImportPlan(
        header=header,
        user_name=names.user,
        character_name=names.character,
        greetings=greeting.texts if greeting else (),
        greeting_index=greeting.chosen_index if greeting else 0,
        steps=tuple(_step(run, names, limits) for run in _runs(kept)),
        warnings=tuple(warnings),
        skipped_lines=tuple(skipped),
    )


def _json_objects(raw: bytes) -> tuple[list[tuple[int, dict[str, Any]]], list[int]]:
    objects: list[tuple[int, dict[str, Any]]] = []
    skipped: list[int] = []
    for number, line in enumerate(raw.removeprefix(_BOM).split(b"\n"), 1):
        if not line.strip():
            continue
        value = _json_or_none(line)
        if isinstance(value, dict):
            objects.append((number, value))
        else:
            skipped.append(number)
    return objects, skipped


def _json_or_none(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def _split_header(objects: list[tuple[int, dict[str, Any]]]) -> tuple[dict[str, Any], int]:
    if not objects or not _is_header(objects[0][1]):
        return {}, 0
    line, header = objects[0]
    typed_field(header, "user_name", line, is_str, "a string")
    typed_field(header, "character_name", line, is_str, "a string")
    typed_field(header, "chat_metadata", line, is_object, "an object")
    return header, line


def _is_header(row: dict[str, Any]) -> bool:
    return not any(key in row for key in _MESSAGE_KEYS) and any(key in row for key in _HEADER_KEYS)


def _greeting(messages: list[SourceMessage | None]) -> SourceMessage | None:
    first = messages[0] if messages else None
    return first if first is not None and first.role == "reply" and not first.hidden else None


def _names(header: dict[str, Any], greeting: SourceMessage | None, messages: list[SourceMessage]) -> _Names:
    speakers = [greeting, *messages] if greeting else messages
    user = header.get("user_name") or _first_name(speakers, "user")
    character = header.get("character_name") or _first_name(speakers, "reply")
    return _Names(user, character)


def _first_name(messages: list[SourceMessage], role: Role) -> str:
    return next((m.name for m in messages if m.role == role and m.name is not None), "")


# Runs and steps


def _runs(messages: list[SourceMessage]) -> list[list[SourceMessage]]:
    runs: list[list[SourceMessage]] = []
    for message in messages:
        if runs and (runs[-1][-1].role, runs[-1][-1].hidden) == (message.role, message.hidden):
            runs[-1].append(message)
        else:
            runs.append([message])
    return runs


def _step(run: list[SourceMessage], names: _Names, limits: ChatLimits) -> ChatStep:
    last, index = run[-1], run[-1].chosen_index
    texts = _joined_texts(run, names, limits) if len(run) > 1 else last.texts
    return ChatStep(
        role=last.role,
        chosen=texts[index],
        alternatives=texts[:index] + texts[index + 1 :],
        chosen_index=index,
        hidden=last.hidden,
        name=names.of(run[0]),
        joined=len(run),
        source_lines=tuple(message.line for message in run),
    )


def _joined_texts(run: list[SourceMessage], names: _Names, limits: ChatLimits) -> tuple[ChatTurnText, ...]:
    lead, last = names.of(run[0]), run[-1]
    parts = [_labelled(m.texts[m.chosen_index].text, names.of(m), lead) for m in run[:-1]]
    before = "".join(f"{part}\n\n" for part in parts)
    name = names.of(last)
    texts = tuple(
        ChatTurnText(before + _labelled(t.text, name, lead), t.sent_at, t.extra, t.generated) for t in last.texts
    )
    for text in texts:
        check_length(text.text, f"line {run[0].line}", limits)
    return texts


def _labelled(text: str, name: str, lead: str) -> str:
    return text if name == lead else f"{name}: {text}"
