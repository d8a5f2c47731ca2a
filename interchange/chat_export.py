"""SillyTavern chat files written without I/O: `write_chat` turns exported rows (`ChatExportMessage`) into a
`.jsonl` file SillyTavern opens.

Writing decisions:

* The header is `{user_name, character_name, create_date, chat_metadata}` with `create_date` in SillyTavern's
  file-name form ("2024-12-01@15h04m00s"), or as an imported chat's header wrote it; lines are joined by "\\n"
  with no trailing newline.
* `send_date` is written in the form SillyTavern's `getMessageTimeStamp` writes ("December 1, 2024 3:04pm"), in
  UTC (`chat_dates`), so a round trip keeps dates to the minute.
* The greeting is an assistant message named `character_name`, always visible (SillyTavern has no hidden
  greeting that its loader would still treat as the greeting). A greeting must come first.
* A message whose generation times are known gets `gen_started` and `gen_finished` (as they were read).
* A greeting or reply with `swipes` gets `swipes`, `swipe_id` and `swipe_info` (one `{send_date, gen_started,
  gen_finished, extra}` per swipe: the message's date for each, its `extra` for the chosen one, {} for the
  others, each swipe's generation times or null). `swipes[swipe_id]` must be the text; a user message cannot
  have swipes. Inconsistent rows raise `ValueError`; `extra` must hold JSON values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import orjson

from interchange.chat_dates import file_date, humanized

Generated = tuple[str | None, str | None]


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
    generated: Generated = (None, None)  # gen_started, gen_finished
    swipes_generated: tuple[Generated, ...] = ()  # each swipe's (none given: unknown)


def write_chat(
    messages: Sequence[ChatExportMessage],
    *,
    user_name: str,
    character_name: str,
    created_at: datetime,
    chat_metadata: Mapping[str, Any] | None = None,
    create_date: str | None = None,
) -> bytes:
    """The chat as SillyTavern's `.jsonl`: the header line, then one line per message; `create_date`: the
    header's date as written (an imported chat's), instead of `created_at`'s."""
    if any(message.role == "greeting" for message in messages[1:]):
        raise ValueError("a greeting can only be the first message")
    header = {
        "user_name": user_name,
        "character_name": character_name,
        "create_date": create_date if create_date is not None else file_date(created_at),
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
        "send_date": humanized(message.sent_at),
        "mes": message.text,
        "extra": dict(message.extra),
    }
    if any(message.generated):
        row["gen_started"], row["gen_finished"] = message.generated
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
    send_date = humanized(message.sent_at)
    return {
        "swipes": list(message.swipes),
        "swipe_id": message.swipe_id,
        "swipe_info": [_swipe_info_row(send_date, message, index) for index in range(len(message.swipes))],
    }


def _swipe_info_row(send_date: str, message: ChatExportMessage, index: int) -> dict[str, Any]:
    extra = dict(message.extra) if index == message.swipe_id else {}
    started, finished = message.swipes_generated[index] if index < len(message.swipes_generated) else (None, None)
    return {"send_date": send_date, "gen_started": started, "gen_finished": finished, "extra": extra}
