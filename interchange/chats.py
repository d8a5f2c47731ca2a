"""SillyTavern chat files (`.jsonl`): read into a plan of the path to build, and written back from rows; no I/O.

`read_chat` turns the bytes of a chat file into a `ChatImportPlan` (header, greeting and its alternatives, one
`ChatStep` per node of the path, warnings); `write_chat` turns exported rows into a file SillyTavern opens.

Reading decisions, where the format is silent:

* Lines are split on "\\n" (a trailing "\\r" and a leading UTF-8 byte-order mark are tolerated). Blank lines are
  ignored silently; a line that is not a JSON object is skipped and listed in `skipped_lines`, as SillyTavern's
  loader skips it.
* The first JSON object is the header when it has neither `mes` nor `is_user` and has `user_name`,
  `character_name` or `chat_metadata`; otherwise the file has no header (a group chat) and `header` is {}.
  A header's `user_name` and `character_name` must be strings and its `chat_metadata` an object.
* `user_name` / `character_name` come from the header, else from the first user message / the greeting or first
  reply, else "". A message without `name` is named after them.
* Every other object is a message. `mes` is required and must be a string; `is_user`, `is_system` must be
  booleans, `name` a string, `swipes` a list of strings, `swipe_id` an integer, `extra` an object. A JSON null
  counts as absent for every field but `mes`. A wrong type raises `ChatFormatError` with the line and field.
* The greeting is the first message when it is neither the user's nor hidden; its swipes are the greeting
  alternatives (`[first_mes, ...alternate_greetings]`) in swipe order and `greeting_index` is the chosen one.
  A chat that opens otherwise has no greeting (empty tuple, index 0). The greeting is never joined: a reply right
  after it becomes a reply step of its own, so the builder may meet a reply with no user message before it.
* `is_system` means hidden, whoever set it (SillyTavern's /hide and its own notes share the flag): the message
  stays, as a hidden step of the role `is_user` gives.
* Consecutive messages of one role and one visibility form a run, joined into one step (a hidden message is never
  joined with a visible one, so a joined step is hidden exactly when all its messages are). Texts are joined with
  a blank line; a part whose speaker differs from the first speaker is prefixed "Name: " (for user runs too: a
  persona may change mid-chat). The step is named after the first speaker. Only the last message of a run can
  have been swiped meaningfully (SillyTavern swipes only the last message), so the alternatives come from the
  last message, each preceded by the earlier parts, and the chosen text's `sent_at` and `extra` are the last
  message's. Steps therefore alternate user/reply except where a hidden run meets a visible run of one role.
* Swipes: the chosen text is `mes` with the message's own `send_date` and `extra`; every other swipe takes its
  `send_date` and `extra` from `swipe_info[i]` when that is an object (else no date, empty extra). When `mes` is
  not `swipes[swipe_id]` (`swipe_id` absent counts as 0): if `mes` is among the swipes, its first occurrence is the
  chosen one; otherwise `mes` is added after the swipes as the chosen one, and every swipe stays an alternative.
  Both cases warn. A malformed `swipe_info` is ignored with a warning. A user message's swipes are ignored, with a
  warning when they hold a text other than `mes`.
* Every step's `alternatives` are its other swipes in swipe order, and `chosen_index` is the chosen text's place
  among `alternatives[:chosen_index] + (chosen,) + alternatives[chosen_index:]`.
* Empty texts (blank after stripping) are not kept: empty swipes are dropped with a warning; a message whose shown
  text is empty takes its first non-empty swipe instead, with a warning; a message with no non-empty text at all
  (an empty user message, an empty reply without swipes) is skipped with a warning, and may let its neighbours
  join. A file with no greeting and no step left raises `ChatFormatError("no messages")`.
* `send_date` parses, to an aware UTC datetime (naive forms taken as UTC): SillyTavern's "December 1, 2024
  3:04pm" (month names full or abbreviated, am/pm optional, seconds optional), ISO 8601 ("2024-12-01 15:04:00",
  "2024-12-01T15:04:00Z"), its file-name form "2024-12-01@15h04m00s" (also "2024-12-1 @15h 04m 00s 120ms"), and
  epoch milliseconds as a number or a string of digits. Anything else is None, never an error.
* Limits (`ChatLimits`): the file's bytes, the message count, the swipes of one message and the characters of one
  text (a source text or a joined one) each raise `ChatFormatError` when exceeded.

Writing decisions:

* The header is `{user_name, character_name, create_date, chat_metadata}` with `create_date` in SillyTavern's
  file-name form ("2024-12-01@15h04m00s"); lines are joined by "\\n" with no trailing newline.
* `send_date` is written in the form SillyTavern's `getMessageTimeStamp` writes ("December 1, 2024 3:04pm"), in
  UTC (the form carries no zone; SillyTavern writes local time, and this reader takes it as UTC), so a round trip
  keeps dates to the minute.
* The greeting is an assistant message named `character_name`, always visible (SillyTavern has no hidden
  greeting that its loader would still treat as the greeting). A greeting must come first.
* A greeting or reply with `swipes` gets `swipes`, `swipe_id` and `swipe_info` (one `{send_date, gen_started,
  gen_finished, extra}` per swipe: the message's date for each, its `extra` for the chosen one, {} for the
  others, generation times null). `swipes[swipe_id]` must be the text; a user message cannot have swipes.
  Inconsistent rows raise `ValueError`; `extra` must hold JSON values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from interchange.json_kinds import kind_of

Role = Literal["user", "reply"]

_BOM = b"\xef\xbb\xbf"
_HEADER_KEYS = ("user_name", "character_name", "chat_metadata")
_MESSAGE_KEYS = ("mes", "is_user")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_NUMBERS = {name.lower(): number for number, name in enumerate(_MONTHS, 1)} | {
    name[:3].lower(): number for number, name in enumerate(_MONTHS, 1)
}
_MONTH_NUMBERS["sept"] = 9
_FLAGS = re.IGNORECASE | re.ASCII
_MONTH_FORM = re.compile(
    r"(?P<month>[a-z]+)\.?\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4}),?\s+(?P<hour>\d{1,2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2}))?\s*(?:(?P<half>[ap])\.?m\.?)?",
    _FLAGS,
)
_AT_FORM = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})\s*@\s*(?P<hour>\d{1,2})h\s*(?P<minute>\d{1,2})m"
    r"(?:\s*(?P<second>\d{1,2})s)?(?:\s*(?P<ms>\d{1,3})\s*ms)?",
    _FLAGS,
)
_DASHED_FORM = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})"
    r"(?:[T\s]+(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d{1,6})\d*)?)?)?",
    _FLAGS,
)
_DIGITS = re.compile(r"-?\d{1,16}", re.ASCII)


class ChatFormatError(ValueError):
    """The bytes are not a SillyTavern chat this reader accepts; `field` names where ("line 3.mes", "file")."""

    def __init__(self, reason: str, field: str = "file") -> None:
        super().__init__(f"{field}: {reason}")
        self.reason = reason
        self.field = field


@dataclass(frozen=True, slots=True)
class ChatLimits:
    max_bytes: int = 256 * 2**20
    max_messages: int = 200_000
    max_swipes: int = 1_000  # of one message (what an import makes is bounded by max_nodes)
    max_text: int = 100_000  # what the API takes for one node
    max_nodes: int = 100_000  # messages and their other swipes: the nodes one import makes, in one transaction
    max_skipped: int = 10_000  # lines that are not JSON objects, past which the file is not taken for a chat


@dataclass(frozen=True, slots=True)
class ChatTurnText:
    text: str
    sent_at: datetime | None
    extra: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChatStep:
    role: Role
    chosen: ChatTurnText
    alternatives: tuple[ChatTurnText, ...]
    chosen_index: int
    hidden: bool
    name: str
    joined: int
    source_lines: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ChatImportPlan:
    header: dict[str, Any]
    user_name: str
    character_name: str
    greetings: tuple[ChatTurnText, ...]
    greeting_index: int
    steps: tuple[ChatStep, ...]
    warnings: tuple[str, ...]
    skipped_lines: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ChatExportMessage:
    role: Literal["greeting", "user", "reply"]
    text: str
    sent_at: datetime
    name: str
    hidden: bool
    swipes: tuple[str, ...] = ()
    swipe_id: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Message:
    line: int
    role: Role
    hidden: bool
    name: str | None
    texts: tuple[ChatTurnText, ...]
    chosen_index: int


@dataclass(frozen=True, slots=True)
class _Names:
    user: str
    character: str

    def of(self, message: _Message) -> str:
        if message.name is not None:
            return message.name
        return self.user if message.role == "user" else self.character


# Reading


def read_chat(raw: bytes, limits: ChatLimits = ChatLimits()) -> ChatImportPlan:
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
    messages = [_read_message(line, row, limits, warnings) for line, row in rows]
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
    _typed(header, "user_name", line, _is_str, "a string")
    _typed(header, "character_name", line, _is_str, "a string")
    _typed(header, "chat_metadata", line, _is_object, "an object")
    return header, line


def _is_header(row: dict[str, Any]) -> bool:
    return not any(key in row for key in _MESSAGE_KEYS) and any(key in row for key in _HEADER_KEYS)


def _greeting(messages: list[_Message | None]) -> _Message | None:
    first = messages[0] if messages else None
    return first if first is not None and first.role == "reply" and not first.hidden else None


def _names(header: dict[str, Any], greeting: _Message | None, messages: list[_Message]) -> _Names:
    speakers = [greeting, *messages] if greeting else messages
    user = header.get("user_name") or _first_name(speakers, "user")
    character = header.get("character_name") or _first_name(speakers, "reply")
    return _Names(user, character)


def _first_name(messages: list[_Message], role: Role) -> str:
    return next((m.name for m in messages if m.role == role and m.name is not None), "")


# One message


def _read_message(line: int, row: dict[str, Any], limits: ChatLimits, warnings: list[str]) -> _Message | None:
    role: Role = "user" if _typed(row, "is_user", line, _is_bool, "a boolean") else "reply"
    hidden = bool(_typed(row, "is_system", line, _is_bool, "a boolean"))
    name = _typed(row, "name", line, _is_str, "a string")
    shown = ChatTurnText(_mes(row, line, limits), _parse_send_date(row.get("send_date")), _extra(row, line))
    swipes = _swipes(row, line, limits)
    swipe_id = _typed(row, "swipe_id", line, _is_int, "an integer") or 0
    if role == "user":
        _warn_user_swipes(line, shown.text, swipes, warnings)
        kept = _without_empty(line, (shown,), 0, warnings)
    else:
        kept = _without_empty(line, *_swiped_texts(line, row, shown, swipes, swipe_id, warnings), warnings)
    return _Message(line, role, hidden, name, *kept) if kept else None


def _mes(row: dict[str, Any], line: int, limits: ChatLimits) -> str:
    if "mes" not in row:
        raise ChatFormatError("missing", f"line {line}.mes")
    mes: str = _typed(row, "mes", line, _is_str, "a string", nullable=False)
    _check_length(mes, f"line {line}.mes", limits)
    return mes


def _extra(row: dict[str, Any], line: int) -> dict[str, Any]:
    extra = _typed(row, "extra", line, _is_object, "an object")
    return extra if extra is not None else {}


def _swipes(row: dict[str, Any], line: int, limits: ChatLimits) -> list[str]:
    swipes: list[Any] | None = _typed(row, "swipes", line, _is_list, "a list of strings")
    if swipes is None:
        return []
    if len(swipes) > limits.max_swipes:
        raise ChatFormatError(f"more than {limits.max_swipes} swipes", f"line {line}.swipes")
    for index, swipe in enumerate(swipes):
        where = f"line {line}.swipes[{index}]"
        if not isinstance(swipe, str):
            raise ChatFormatError(f"a string expected, got {kind_of(swipe)}", where)
        _check_length(swipe, where, limits)
    return swipes


def _warn_user_swipes(line: int, mes: str, swipes: list[str], warnings: list[str]) -> None:
    if any(swipe != mes for swipe in swipes):
        warnings.append(f"line {line}: a user message's swipes are ignored")


def _swiped_texts(
    line: int, row: dict[str, Any], shown: ChatTurnText, swipes: list[str], swipe_id: int, warnings: list[str]
) -> tuple[tuple[ChatTurnText, ...], int]:
    if not swipes:
        return (shown,), 0
    texts = [ChatTurnText(text, *info) for text, info in zip(swipes, _swipe_infos(line, row, warnings), strict=False)]
    index = _chosen_swipe(line, shown.text, swipes, swipe_id, warnings)
    if index == len(texts):
        texts.append(shown)
    else:
        texts[index] = shown
    return tuple(texts), index


def _chosen_swipe(line: int, mes: str, swipes: list[str], swipe_id: int, warnings: list[str]) -> int:
    if 0 <= swipe_id < len(swipes) and swipes[swipe_id] == mes:
        return swipe_id
    if mes in swipes:
        warnings.append(f"line {line}: swipe_id {swipe_id} does not show mes; the swipe equal to mes is chosen")
        return swipes.index(mes)
    warnings.append(f"line {line}: mes is none of the swipes; it is kept as a further swipe and chosen")
    return len(swipes)


def _swipe_infos(
    line: int, row: dict[str, Any], warnings: list[str]
) -> Iterator[tuple[datetime | None, dict[str, Any]]]:
    infos = row.get("swipe_info")
    if infos is not None and not isinstance(infos, list):
        warnings.append(f"line {line}: swipe_info is not a list; ignored")
        infos = None
    for info in infos or ():
        yield _swipe_info(info)
    while True:
        yield None, {}


def _swipe_info(info: Any) -> tuple[datetime | None, dict[str, Any]]:
    if not isinstance(info, dict):
        return None, {}
    extra = info.get("extra")
    return _parse_send_date(info.get("send_date")), extra if isinstance(extra, dict) else {}


def _without_empty(
    line: int, texts: tuple[ChatTurnText, ...], index: int, warnings: list[str]
) -> tuple[tuple[ChatTurnText, ...], int] | None:
    kept = tuple(text for text in texts if text.text.strip())
    if not kept:
        warnings.append(f"line {line}: an empty message is skipped")
        return None
    if len(kept) < len(texts) and texts[index].text.strip():
        warnings.append(f"line {line}: empty swipes are dropped")
    if not texts[index].text.strip():
        warnings.append(f"line {line}: the shown text is empty; the first non-empty swipe is chosen")
        return kept, 0
    return kept, sum(1 for text in texts[:index] if text.text.strip())


# Field types


def _typed(
    row: dict[str, Any], key: str, line: int, check: Callable[[Any], bool], expected: str, *, nullable: bool = True
) -> Any:
    value = row.get(key)
    if (value is not None or not nullable) and not check(value):
        raise ChatFormatError(f"{expected} expected, got {kind_of(value)}", f"line {line}.{key}")
    return value


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def _check_length(text: str, where: str, limits: ChatLimits) -> None:
    if len(text) > limits.max_text:
        raise ChatFormatError(f"a text longer than {limits.max_text} characters", where)


# Runs and steps


def _runs(messages: list[_Message]) -> list[list[_Message]]:
    runs: list[list[_Message]] = []
    for message in messages:
        if runs and (runs[-1][-1].role, runs[-1][-1].hidden) == (message.role, message.hidden):
            runs[-1].append(message)
        else:
            runs.append([message])
    return runs


def _step(run: list[_Message], names: _Names, limits: ChatLimits) -> ChatStep:
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


def _joined_texts(run: list[_Message], names: _Names, limits: ChatLimits) -> tuple[ChatTurnText, ...]:
    lead, last = names.of(run[0]), run[-1]
    parts = [_labelled(m.texts[m.chosen_index].text, names.of(m), lead) for m in run[:-1]]
    before = "".join(f"{part}\n\n" for part in parts)
    name = names.of(last)
    texts = tuple(ChatTurnText(before + _labelled(t.text, name, lead), t.sent_at, t.extra) for t in last.texts)
    for text in texts:
        _check_length(text.text, f"line {run[0].line}", limits)
    return texts


def _labelled(text: str, name: str, lead: str) -> str:
    return text if name == lead else f"{name}: {text}"


# Dates


def _parse_send_date(value: Any) -> datetime | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _from_epoch_ms(value)
    if isinstance(value, str):
        return _from_text(value.strip())
    return None


def _from_epoch_ms(value: float) -> datetime | None:
    try:
        return datetime.fromtimestamp(value / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _from_text(text: str) -> datetime | None:
    if _DIGITS.fullmatch(text):
        return _from_epoch_ms(int(text))
    return (
        _from_iso(text) or _from_month_form(text) or _from_numbers(_AT_FORM, text) or _from_numbers(_DASHED_FORM, text)
    )


def _from_iso(text: str) -> datetime | None:
    try:
        return _as_utc(datetime.fromisoformat(text))
    except (ValueError, OverflowError):
        return None


def _from_month_form(text: str) -> datetime | None:
    match = _MONTH_FORM.fullmatch(text)
    month = _MONTH_NUMBERS.get(match["month"].lower()) if match else None
    if match is None or month is None:
        return None
    hour = _clock_hour(int(match["hour"]), match["half"])
    if hour is None:
        return None
    return _moment(int(match["year"]), month, int(match["day"]), hour, int(match["minute"]), match["second"])


def _clock_hour(hour: int, half: str | None) -> int | None:
    if half is None:
        return hour
    if not 1 <= hour <= 12:
        return None
    return hour % 12 + (12 if half.lower() == "p" else 0)


def _from_numbers(form: re.Pattern[str], text: str) -> datetime | None:
    match = form.fullmatch(text)
    if match is None:
        return None
    parts = match.groupdict()
    micros = _micros(parts.get("fraction"), parts.get("ms"))
    year, month, day = int(parts["year"]), int(parts["month"]), int(parts["day"])
    return _moment(year, month, day, int(parts["hour"] or 0), int(parts["minute"] or 0), parts["second"], micros)


def _micros(fraction: str | None, millis: str | None) -> int:
    if fraction:
        return int(fraction.ljust(6, "0"))
    return int(millis) * 1000 if millis else 0


def _moment(
    year: int, month: int, day: int, hour: int, minute: int, second: str | None, micros: int = 0
) -> datetime | None:
    try:
        return datetime(year, month, day, hour, minute, int(second or 0), micros, tzinfo=UTC)
    except ValueError:
        return None


def _as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _humanized(moment: datetime) -> str:
    utc = _as_utc(moment)
    half = "pm" if utc.hour >= 12 else "am"
    return f"{_MONTHS[utc.month - 1]} {utc.day}, {utc.year} {utc.hour % 12 or 12}:{utc.minute:02d}{half}"


def _file_date(moment: datetime) -> str:
    utc = _as_utc(moment)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}@{utc.hour:02d}h{utc.minute:02d}m{utc.second:02d}s"


# Writing


def write_chat(
    messages: Sequence[ChatExportMessage],
    *,
    user_name: str,
    character_name: str,
    created_at: datetime,
    chat_metadata: Mapping[str, Any] | None = None,
) -> bytes:
    if any(message.role == "greeting" for message in messages[1:]):
        raise ValueError("a greeting can only be the first message")
    header = {
        "user_name": user_name,
        "character_name": character_name,
        "create_date": _file_date(created_at),
        "chat_metadata": dict(chat_metadata or {}),
    }
    rows = [header, *(_message_row(message, character_name) for message in messages)]
    return b"\n".join(orjson.dumps(row) for row in rows)


def _message_row(message: ChatExportMessage, character_name: str) -> dict[str, Any]:
    greeting = message.role == "greeting"
    row: dict[str, Any] = {
        "name": character_name if greeting else message.name,
        "is_user": message.role == "user",
        "is_system": message.hidden and not greeting,
        "send_date": _humanized(message.sent_at),
        "mes": message.text,
        "extra": dict(message.extra),
    }
    if message.swipes:
        return row | _swipe_fields(message)
    if message.swipe_id != 0:
        raise ValueError(f"swipe_id {message.swipe_id} without swipes")
    return row


def _swipe_fields(message: ChatExportMessage) -> dict[str, Any]:
    if message.role == "user":
        raise ValueError("a user message cannot have swipes")
    if not 0 <= message.swipe_id < len(message.swipes) or message.swipes[message.swipe_id] != message.text:
        raise ValueError(f"swipes[{message.swipe_id}] is not the message's text")
    send_date = _humanized(message.sent_at)
    return {
        "swipes": list(message.swipes),
        "swipe_id": message.swipe_id,
        "swipe_info": [_swipe_info_row(send_date, message, index) for index in range(len(message.swipes))],
    }


def _swipe_info_row(send_date: str, message: ChatExportMessage, index: int) -> dict[str, Any]:
    extra = dict(message.extra) if index == message.swipe_id else {}
    return {"send_date": send_date, "gen_started": None, "gen_finished": None, "extra": extra}
