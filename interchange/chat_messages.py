"""One message line of a SillyTavern chat file, read: its fields checked by type, its swipes, the chosen text and
the empty texts left out. The typed reading of a line's fields is shared with the header.

* `mes` is required and must be a string; `is_user`, `is_system` must be booleans, `name` a string, `swipes` a list
  of strings, `swipe_id` an integer, `extra` an object. A JSON null counts as absent for every field but `mes`. A
  wrong type raises `ChatFormatError` with the line and field.
* `is_system` means hidden, whoever set it (SillyTavern's /hide and its own notes share the flag): the message
  stays, as a hidden message of the role `is_user` gives.
* Swipes: the chosen text is `mes` with the message's own `send_date` and `extra`; every other swipe takes its
  `send_date` and `extra` from `swipe_info[i]` when that is an object (else no date, empty extra). When `mes` is
  not `swipes[swipe_id]` (`swipe_id` absent counts as 0): if `mes` is among the swipes, its first occurrence is the
  chosen one; otherwise `mes` is added after the swipes as the chosen one, and every swipe stays an alternative.
  Both cases warn. A malformed `swipe_info` is ignored with a warning. A user message's swipes are ignored, with a
  warning when they hold a text other than `mes`.
* Empty texts (blank after stripping) are not kept: empty swipes are dropped with a warning; a message whose shown
  text is empty takes its first non-empty swipe instead, with a warning; a message with no non-empty text at all
  (an empty user message, an empty reply without swipes) is skipped with a warning.
* The swipes of one message and the characters of one text raise `ChatFormatError` past their `ChatLimits`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from interchange.chat_dates import parse_send_date
from interchange.chat_plan import ChatFormatError, ChatLimits, ChatTurnText, Role
from interchange.json_kinds import kind_of


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """A message as the file has it: its line, role, visibility, speaker, and its texts with the chosen one."""

    line: int
    role: Role
    hidden: bool
    name: str | None
    texts: tuple[ChatTurnText, ...]
    chosen_index: int


def read_message(line: int, row: dict[str, Any], limits: ChatLimits, warnings: list[str]) -> SourceMessage | None:
    """The message on one line, or None when it has no non-empty text (skipped with a warning)."""
    role: Role = "user" if typed_field(row, "is_user", line, _is_bool, "a boolean") else "reply"
    hidden = bool(typed_field(row, "is_system", line, _is_bool, "a boolean"))
    name = typed_field(row, "name", line, is_str, "a string")
    shown = ChatTurnText(
        _mes(row, line, limits), parse_send_date(row.get("send_date")), _extra(row, line), _generated(row)
    )
    swipes = _swipes(row, line, limits)
    swipe_id = typed_field(row, "swipe_id", line, _is_int, "an integer") or 0
    if role == "user":
        _warn_user_swipes(line, shown.text, swipes, warnings)
        kept = _without_empty(line, (shown,), 0, warnings)
    else:
        kept = _without_empty(line, *_swiped_texts(line, row, shown, swipes, swipe_id, warnings), warnings)
    return SourceMessage(line, role, hidden, name, *kept) if kept else None


def _mes(row: dict[str, Any], line: int, limits: ChatLimits) -> str:
    if "mes" not in row:
        raise ChatFormatError("missing", f"line {line}.mes")
    mes: str = typed_field(row, "mes", line, is_str, "a string", nullable=False)
    check_length(mes, f"line {line}.mes", limits)
    return mes


def _extra(row: dict[str, Any], line: int) -> dict[str, Any]:
    extra = typed_field(row, "extra", line, is_object, "an object")
    return extra if extra is not None else {}


def _swipes(row: dict[str, Any], line: int, limits: ChatLimits) -> list[str]:
    swipes: list[Any] | None = typed_field(row, "swipes", line, _is_list, "a list of strings")
    if swipes is None:
        return []
    if len(swipes) > limits.max_swipes:
        raise ChatFormatError(f"more than {limits.max_swipes} swipes", f"line {line}.swipes")
    for index, swipe in enumerate(swipes):
        where = f"line {line}.swipes[{index}]"
        if not isinstance(swipe, str):
            raise ChatFormatError(f"a string expected, got {kind_of(swipe)}", where)
        check_length(swipe, where, limits)
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
    else:  # (the shown swipe's times: the message's own, else its swipe_info's)
        texts[index] = shown if any(shown.generated) else replace(shown, generated=texts[index].generated)
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
) -> Iterator[tuple[datetime | None, dict[str, Any], tuple[str | None, str | None]]]:
    infos = row.get("swipe_info")
    if infos is not None and not isinstance(infos, list):
        warnings.append(f"line {line}: swipe_info is not a list; ignored")
        infos = None
    for info in infos or ():
        yield _swipe_info(info)
    while True:
        yield None, {}, (None, None)


def _swipe_info(info: Any) -> tuple[datetime | None, dict[str, Any], tuple[str | None, str | None]]:
    if not isinstance(info, dict):
        return None, {}, (None, None)
    extra = info.get("extra")
    return parse_send_date(info.get("send_date")), extra if isinstance(extra, dict) else {}, _generated(info)


def _generated(row: dict[str, Any]) -> tuple[str | None, str | None]:
    """`gen_started` and `gen_finished` as written (SillyTavern's ISO times), when they are strings."""
    started, finished = row.get("gen_started"), row.get("gen_finished")
    return (started if isinstance(started, str) else None, finished if isinstance(finished, str) else None)


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


def typed_field(
    row: dict[str, Any], key: str, line: int, check: Callable[[Any], bool], expected: str, *, nullable: bool = True
) -> Any:
    """The field's value, checked by `check` unless it is null and may be; a wrong type names line and field."""
    value = row.get(key)
    if (value is not None or not nullable) and not check(value):
        raise ChatFormatError(f"{expected} expected, got {kind_of(value)}", f"line {line}.{key}")
    return value


def is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def check_length(text: str, where: str, limits: ChatLimits) -> None:
    if len(text) > limits.max_text:
        raise ChatFormatError(f"a text longer than {limits.max_text} characters", where)
